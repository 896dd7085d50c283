// Reading and writing numpy's .npy files: the format every mlpipe tool uses
// for tensors on disk.
//
// Supported: little-endian f32, f64, f16 ('<f4' '<f8' '<f2', or '=' for
// native order), signed integers ('|i1' '<i2' '<i4' '<i8': i8 ... i64),
// unsigned ones ('|u1' '<u2' '<u4' '<u8': u8 ... u64) and bool ('|b1',
// mlpipe's i1), C
// order, format versions 1.0, 2.0 and 3.0, any rank including scalars and
// zero-size dimensions. Anything else is refused with one mlpipe::Error
// sentence that names the file and what is wrong.
//
// bf16 has no numpy dtype: a bf16 tensor is written as f32 (every bf16 value
// is exactly an f32), and `run` rounds an f32 file given for a bf16 input to
// nearest even.
//
// The reader trusts nothing in the file: every length and count is checked
// against the bytes actually present before anything is allocated, so a
// hostile or corrupt file costs at most its own size in memory.
#pragma once

#include "support/host_tensor.h"

#include <string>
#include <string_view>

namespace mlpipe {

// Parses a whole .npy file held in memory. `source` names it in messages
// (usually its path).
HostTensor parseNpy(std::string_view bytes, const std::string &source);

// Reads `path` ("-" = stdin) and parses it; throws mlpipe::Error.
HostTensor readNpy(const std::string &path);

// The .npy bytes for `tensor` (a bf16 tensor as f32): a version 1.0 header (2.0 only if the header
// would not fit in 1.0) padded as numpy pads it, so the data starts on a
// 64-byte boundary, followed by the data in C order.
std::string serializeNpy(const HostTensor &tensor);

// Writes `tensor` to `path` ("-" = stdout) atomically through writeOutput:
// on failure no file is left behind and an existing one is untouched.
void writeNpy(const std::string &path, const HostTensor &tensor);

} // namespace mlpipe
