# lit configuration for mlpipe's tool and pipeline tests.
import os
import subprocess

import lit.formats

config.name = "mlpipe"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "run-if-gpu.sh"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mlpipe_binary_dir, "test")

# python3 in the tests is the interpreter that runs lit, as LLVM's %python
# is: a version manager's python3 in PATH may be a shim that starts a shell
# and the manager first, a third of a second each time (the tests run
# python3 some three hundred times).
import sys
python_dir = os.path.join(config.test_exec_root, "python")
python_link = os.path.join(python_dir, "python3")
if os.path.realpath(python_link) != os.path.realpath(sys.executable):
    os.makedirs(python_dir, exist_ok=True)
    staged = "%s.%d" % (python_link, os.getpid())
    os.symlink(sys.executable, staged)
    os.replace(staged, python_link)  # atomic: suites load this configuration at the same time

path = [config.mlpipe_tools_dir, python_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])]
config.environment["PATH"] = os.pathsep.join(path)
for variable in ["HOME", "CUDA_HOME", "LD_LIBRARY_PATH", "MLPIPE_TOKENIZER_DIR"]:
    if variable in os.environ:
        config.environment[variable] = os.environ[variable]
# OpenBLAS starts a thread a core, which spin while they wait for work;
# the tests already run several processes a core (ctest -j, lit -j), and
# their matrices are small.
config.environment["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS", "1")

config.substitutions.append(("%testdata", os.path.join(config.mlpipe_source_dir, "testdata")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%cuda_toolkit", config.cuda_toolkit))

import shutil
if shutil.which("gnuplot"):
    config.available_features.add("gnuplot")
# "cublas" when the toolkit has the cuBLAS that outline loads by default.
import glob
if glob.glob(os.path.join(config.cuda_toolkit, "lib64", "libcublas.so.*")):
    config.available_features.add("cublas")

if os.path.exists(os.path.join(config.llvm_tools_dir, "llvm-as")):
    config.available_features.add("llvm-as")

# "gpu" when the run tool finds a usable GPU (it loads the driver itself).
run_tool = os.path.join(config.mlpipe_tools_dir, "run")
if os.path.exists(run_tool):
    probe = subprocess.run([run_tool, "--gpu-info"], capture_output=True, env=config.environment)
    if probe.returncode == 0:
        config.available_features.add("gpu")
