#!/usr/bin/env python3
"""Runs every example that a tool's --help prints, as printed, and fails if
one fails.

  help_examples.py --testdata DIR --scratch DIR (--cpu | --gpu)

--cpu runs the examples that need no GPU and names the others as skipped;
--gpu runs those that need one. Each runs with bash (pipefail) in the
scratch directory, after the files the examples name (x.npy, y.npy,
expected.npy, model.hlo and its inputs in run/, gpt2/model.safetensors with
its config.json, prompts.txt) have been made there; examples run in the order printed,
so one may use what an earlier one wrote (run's gelu.mlir); with --gpu, the
examples that write a file run too, for the GPU examples after them.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

TOOLS = ["trace", "fuse", "bufferize", "outline", "lower-nvvm", "lower-cpu", "ptx-check", "run", "verify",
         "generate", "bench"]

# GPT-2 tiny's shapes, as `--config tiny` names them.
TINY_CONFIG = '{"n_layer": 2, "n_head": 2, "n_embd": 64, "vocab_size": 50257, "n_positions": 1024}\n'


def examples(tool):
    text = subprocess.run([tool, "--help"], capture_output=True, text=True, check=True).stdout
    found, inside = [], False
    for line in text.splitlines():
        if re.fullmatch(r"Examples?:", line.strip()):
            inside = True
            continue
        if inside:
            if not line.startswith("  "):
                inside = line.strip() == "" and not found and inside
                if found:
                    break
                continue
            command = line.split("#")[0].strip()
            if command:
                found.append(command)
    return found


def needs_gpu(command):
    words = command.split()
    if words[0] == "bench" or "--target gpu" in command or "--matmul cublas" in command:
        return True
    # run on a module lower-nvvm wrote, or asking for the GPU's name.
    if words[0] == "run" and "lower-cpu" not in command:
        return True
    return False


def writes_file(command):
    """Whether an example writes a file a later one may read (`> gelu.mlir`,
    `-o FILE`): such examples run in both modes."""
    return re.search(r"(^|\s)(>|-o)\s", command) is not None


def prepare(scratch, testdata):
    if os.path.exists(scratch):
        shutil.rmtree(scratch)
    os.makedirs(os.path.join(scratch, "gpt2"))
    fixtures = os.path.join(scratch, "fixtures")
    subprocess.run(["verify", "gelu", "--target", "cpu", "--seed", "5", "--save", fixtures], check=True,
                   stdout=subprocess.DEVNULL)
    shutil.copy(os.path.join(fixtures, "gelu", "x.npy"), os.path.join(scratch, "x.npy"))
    shutil.copy(os.path.join(fixtures, "gelu", "y.npy"), os.path.join(scratch, "y.npy"))
    shutil.copy(os.path.join(fixtures, "gelu", "y.reference.npy"), os.path.join(scratch, "expected.npy"))
    shutil.copy(os.path.join(testdata, "hlo", "transformer_block.hlo"), os.path.join(scratch, "model.hlo"))
    # verify --inputs run/ reads run/in<i>.npy in parameter order: model.hlo's inputs as verify saves them.
    subprocess.run(["verify", os.path.join(scratch, "model.hlo"), "--target", "cpu", "--seed", "5", "--save",
                    fixtures], check=True, stdout=subprocess.DEVNULL)
    os.makedirs(os.path.join(scratch, "run"))
    with open(os.path.join(scratch, "model.hlo")) as model:
        entry = model.read().split("ENTRY", 1)[1]
    for name, number in re.findall(r"(\S+) = \S+ parameter\((\d+)\)", entry):
        shutil.copy(os.path.join(fixtures, "model", name + ".npy"), os.path.join(scratch, "run", f"in{number}.npy"))
    subprocess.run(["verify", "gpt2", "--steps", "1", "--target", "cpu", "--config", "tiny", "--save-weights",
                    os.path.join(scratch, "gpt2", "model.safetensors")], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(scratch, "gpt2", "config.json"), "w") as config:
        config.write(TINY_CONFIG)
    # generate --prompts reads one prompt a line.
    with open(os.path.join(scratch, "prompts.txt"), "w") as prompts:
        prompts.write("Hello\nThe meaning of life is\nOnce upon a time\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--testdata", required=True)
    parser.add_argument("--scratch", required=True)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--cpu", action="store_true")
    group.add_argument("--gpu", action="store_true")
    args = parser.parse_args()
    prepare(args.scratch, args.testdata)
    failures = 0
    for tool in TOOLS:
        listed = examples(tool)
        if not listed:
            print(f"FAIL: {tool} --help shows no example")
            failures += 1
        for command in listed:
            if needs_gpu(command) != args.gpu and not (args.gpu and writes_file(command)):
                if args.cpu:
                    print(f"SKIP (needs a GPU; the GPU round runs it): {command}")
                continue
            result = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=args.scratch,
                                    capture_output=True, text=True)
            if result.returncode == 0:
                print(f"PASS: {command}")
            else:
                failures += 1
                tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
                print(f"FAIL (exit {result.returncode}): {command}\n    " + "\n    ".join(tail))
    print(f"{failures} example(s) failed" if failures else "every example passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
