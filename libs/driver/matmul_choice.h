// Which path GPU matmuls take: `--matmul cublas|generated` on outline, verify
// and the GPT-2 tools. cuBLAS is the default where it loads; where it does
// not, the generated kernel is used, after a one-line notice.
#pragma once

#include <string>

namespace mlpipe {

// The flag's help text, shared by every tool that takes it.
extern const char *const kMatmulFlagHelp;
extern const char *const kPrecisionFlagHelp;

// "cublas" or "generated" for a requested choice: an explicit one is kept
// (a module compiled for cuBLAS needs it where it runs, which need not be
// here); "" becomes "cublas" when cuBLAS loads on this machine, else
// "generated", and then, once per process, stderr gets
//   outline: notice: cuBLAS could not be loaded: ...; matmuls use the generated kernel
// Throws mlpipe::Error for any other value.
std::string resolveMatmulChoice(const std::string &requested);

// Refuses a --precision other than f32 or tf32.
void checkPrecision(const std::string &precision);

// How reports name the choice: "cublas matmuls", "generated matmuls",
// "cublas matmuls, tf32".
std::string describeMatmuls(const std::string &matmul, const std::string &precision);

} // namespace mlpipe
