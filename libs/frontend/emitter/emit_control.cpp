// Loops: a While node as scf.while on tensors. The before region computes
// the condition (a rank-0 i1 tensor, read with tensor.extract) and passes
// the carried tensors on; the after region computes the body and yields
// the next carried tensors. Each region is its graph written by an emitter
// of its own, which numbers values on from this one's:
//
//   %v9:2 = scf.while (%v10 = %arg0, %v11 = %v8) : (tensor<8xf32>, tensor<i32>)
//       -> (tensor<8xf32>, tensor<i32>) {
//     ... the condition's ops on %v10, %v11, giving %v14: tensor<i1>
//     %v15 = tensor.extract %v14[] : tensor<i1>
//     scf.condition(%v15) %v10, %v11 : tensor<8xf32>, tensor<i32>
//   } do {
//   ^bb0(%v16: tensor<8xf32>, %v17: tensor<i32>):
//     ... the body's ops, giving %v20, %v21
//     scf.yield %v20, %v21 : tensor<8xf32>, tensor<i32>
//   }
//
// and a LoopResult node is %v9#i.
#include "frontend/emitter/function_emitter.h"

#include <fmt/ranges.h>

namespace mlpipe::fe::emitter {

std::vector<std::string> FunctionEmitter::emitRegion(const std::vector<std::string> &arguments) {
  markLive();
  for (size_t i = 0; i < graph_.inputs().size(); ++i)
    names_[graph_.inputs()[i]] = arguments.at(i);
  for (size_t id = 0; id < graph_.nodes().size(); ++id)
    if (live_[id] && graph_.node(static_cast<int>(id)).kind != OpKind::Input)
      emitNode(static_cast<int>(id));
  std::vector<std::string> values;
  for (auto &[name, id] : graph_.outputs())
    values.push_back(value(id));
  return values;
}

void FunctionEmitter::emitWhile(int id) {
  const Node &node = graph_.node(id);
  std::vector<std::string> inits, types, before, after, beforeBindings, afterArguments;
  for (int operand : node.operands) {
    inits.push_back(value(operand));
    types.push_back(type(operand));
  }
  for (size_t i = 0; i < inits.size(); ++i) {
    before.push_back(fresh());
    beforeBindings.push_back(fmt::format("{} = {}", before.back(), inits[i]));
  }
  std::string name = fresh();
  std::string typeList = fmt::format("{}", fmt::join(types, ", "));
  line("{}:{} = scf.while ({}) : ({}) -> ({}) {{", name, inits.size(), fmt::join(beforeBindings, ", "), typeList,
       typeList);
  {
    std::unique_ptr<Graph> lowered = withOpsLowered(*node.condition);
    FunctionEmitter condition(lowered ? *lowered : *node.condition, out_, counter_);
    std::vector<std::string> holds = condition.emitRegion(before);
    std::string flag = fresh();
    line("{} = tensor.extract {}[] : tensor<i1>", flag, holds.at(0));
    line("scf.condition({}) {} : {}", flag, fmt::join(before, ", "), typeList);
  }
  line("}} do {{");
  for (size_t i = 0; i < inits.size(); ++i) {
    after.push_back(fresh());
    afterArguments.push_back(fmt::format("{}: {}", after.back(), types[i]));
  }
  line("^bb0({}):", fmt::join(afterArguments, ", "));
  {
    std::unique_ptr<Graph> lowered = withOpsLowered(*node.body);
    FunctionEmitter body(lowered ? *lowered : *node.body, out_, counter_);
    std::vector<std::string> next = body.emitRegion(after);
    line("scf.yield {} : {}", fmt::join(next, ", "), typeList);
  }
  line("}}");
  scope_ = node.scope;
  names_[id] = name;
}

} // namespace mlpipe::fe::emitter
