// The matmul emitter. Until the generated register-tiled kernel takes an
// epilogue, a matmul fusion has no emitter of its own: the classifier
// reports it, and the emit pass emits the fusion op by op (the matmul left
// in host code for the matmul passes, its epilogue a loop kernel).
#include "compiler/emitters/fusion_emitter.h"

namespace mlpipe::emitters {

std::unique_ptr<FusionEmitter> makeMatmulEmitter(const FusionGraph &, const EmitterOptions &) { return nullptr; }

} // namespace mlpipe::emitters
