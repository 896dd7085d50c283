// HLO's control flow, as JAX writes it: `while` (lax.scan, lax.fori_loop,
// lax.while_loop) unrolled when its trip count is a small constant known
// when the module is read, and otherwise recorded as a loop run at run
// time (Graph::whileLoop: its condition and body recorded once, each as a
// graph of its own over the carried tensors); and `conditional` (lax.cond,
// lax.switch) computed as every branch and a select between their results.
//
// A loop's trip count is known in the form lax.scan and lax.fori_loop
// write: one integer element of the loop-carried tuple (the counter) starts
// at a constant, the condition computation's ROOT compares it with a
// constant, and the body's ROOT tuple gives it back plus or minus a
// constant. The count follows from those three numbers; the body is then
// inlined once per trip, the tuple it returns passed to the next, so the
// counter is a constant in every trip (a scan's dynamic-slice of its inputs
// reads a constant start) and zero trips give the initial tuple. A loop
// whose count is not known (a bound or start computed at run time, a
// condition on data, a counter stepped otherwise), or is larger than
// kMaxUnrolledTrips, runs at run time instead; one whose counter provably
// never ends is refused.
//
// After XLA's passes the same loop is written through fusions: the
// condition's ROOT is a fusion computing the compare, the body's counter a
// fusion computing the add, its start a copy of the constant. The counter
// is found by looking through fusions, calls and copies (a fused
// computation's parameter standing for the fusion's operand). XLA also
// writes the count it proved, backend_config={"known_trip_count":{"n":"N"}}:
// where the reader finds the counter too, the two must agree; where it does
// not, N is all there is and is used, the condition still checked wherever
// it folds to a constant.
//
// XLA's asynchronous pairs (fusion-start and fusion-done, async-start with
// calls=, copy-start and copy-done) run one op in two halves; the values are
// the op's, so they are read as the op: the start's tuple holds the
// operands, the op's result and a context, and the done takes the result
// out of it.
//
// The branches of a conditional are pure computations, so computing all of
// them and selecting one result changes no value: with a pred, select(p,
// true branch, false branch); with an s32 index over N branches, the index
// compared with 0 .. N-2 and anything else (negative or from N up) giving
// the last branch, as XLA clamps it. A predicate or index that is a
// constant picks its branch when the module is read.
#include "frontend/hlo/hlo_builder.h"
#include "frontend/hlo/hlo_json.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

namespace mlpipe::fe::hlo {

namespace {

using Wide = __int128;

// The most trips a loop with a constant trip count is unrolled to. Unrolled,
// every trip's counter is a constant (a scan's dynamic-slice reads a fixed
// place) and the trips' kernels launch back to back with no read of the
// condition; but the module grows by a body per trip, and compile time with
// it. Past this many trips the loop is compiled once and run: a body that
// small programs repeat a few dozen times stays unrolled, and a long loop
// compiles in the time of one trip.
constexpr int64_t kMaxUnrolledTrips = 64;

// A value's shape as HLO writes it: "f32[3]", "(f32[3], s32[])".
std::string valueShape(const Value &value) {
  if (value.tensor)
    return hloShape(value.tensor->dtype(), value.tensor->shape());
  std::vector<std::string> parts;
  for (const Value &element : value.elements)
    parts.push_back(valueShape(element));
  return fmt::format("({})", fmt::join(parts, ", "));
}

// An instruction as a loop's condition or body computes it, seen through
// the fusions and calls it is inside: `caller` is the fusion or call whose
// computation holds `ins` (null: the loop's own computation), so a
// parameter of a fused computation stands for the caller's operand.
struct Site {
  const Computation *computation = nullptr;
  const Instruction *ins = nullptr;
  std::shared_ptr<const Site> caller;
};

// The computation a fusion or call instruction calls, or nullptr.
const Computation *callee(const ModuleText &module, const Instruction &ins) {
  std::string_view key = ins.opcode == "call" ? "to_apply" : "calls";
  for (const Attribute &attribute : ins.attributes)
    if (attribute.name == key) {
      std::string_view name = attribute.text;
      if (!name.empty() && name.front() == '%')
        name.remove_prefix(1);
      auto found = module.byName.find(std::string(name));
      return found == module.byName.end() ? nullptr : &module.computations[found->second];
    }
  return nullptr;
}

// Operand i of `site`'s instruction, as written (not looked through).
std::optional<Site> rawOperand(const Site &site, size_t i) {
  if (i >= site.ins->operands.size())
    return std::nullopt;
  auto found = site.computation->byName.find(site.ins->operands[i].name);
  if (found == site.computation->byName.end())
    return std::nullopt;
  return Site{site.computation, &site.computation->instructions[found->second], site.caller};
}

// What `site` computes, looked through copies, fusions, calls and the
// parameters of the computations they call.
std::optional<Site> lookThrough(const ModuleText &module, Site site) {
  for (int step = 0; step < 4 * kMaxNesting; ++step) {
    const Instruction &ins = *site.ins;
    if (ins.opcode == "copy" && ins.operands.size() == 1) {
      std::optional<Site> next = rawOperand(site, 0);
      if (!next)
        return std::nullopt;
      site = *next;
    } else if (ins.opcode == "fusion" || ins.opcode == "call") {
      const Computation *called = callee(module, ins);
      if (!called)
        return std::nullopt;
      site = Site{called, &called->instructions[called->root], std::make_shared<const Site>(site)};
    } else if (ins.opcode == "parameter" && site.caller) {
      std::optional<Site> next =
          rawOperand(*site.caller, static_cast<size_t>(std::max<int64_t>(0, ins.parameterNumber)));
      if (!next || ins.parameterNumber < 0)
        return std::nullopt;
      site = *next;
    } else {
      return site;
    }
  }
  return std::nullopt; // calls that nest too deep (or call themselves)
}

// Operand i of `site`, looked through.
std::optional<Site> operandOf(const ModuleText &module, const Site &site, size_t i) {
  std::optional<Site> operand = rawOperand(site, i);
  return operand ? lookThrough(module, *operand) : std::nullopt;
}

// The tuple element `site` reads from the loop computation's parameter 0 (a
// get-tuple-element of it), or nullopt.
std::optional<int64_t> parameterElement(const ModuleText &module, const Site &site) {
  const Instruction &ins = *site.ins;
  if (ins.opcode != "get-tuple-element" || ins.operands.size() != 1)
    return std::nullopt;
  std::optional<Site> tuple = operandOf(module, site, 0);
  if (!tuple || tuple->caller || tuple->ins->opcode != "parameter" || tuple->ins->parameterNumber != 0)
    return std::nullopt;
  for (const Attribute &attribute : ins.attributes)
    if (attribute.name == "index") {
      std::string_view text = attribute.text;
      int64_t index = 0;
      for (char c : text) {
        if (c < '0' || c > '9')
          return std::nullopt;
        index = index * 10 + (c - '0');
        if (index > (int64_t(1) << 30))
          return std::nullopt;
      }
      return text.empty() ? std::nullopt : std::optional<int64_t>(index);
    }
  return std::nullopt;
}

// The value of a scalar integer `constant` instruction (a whole number
// that fits in 64 bits), or nullopt.
std::optional<double> scalarConstant(const Instruction *ins) {
  if (!ins || ins->opcode != "constant" || !ins->shape || ins->shape->tuple || !ins->shape->dims.empty() ||
      ins->literal.size() != 1)
    return std::nullopt;
  double value = ins->literal.front();
  if (!std::isfinite(value) || value != std::trunc(value) || std::fabs(value) > 0x1p64)
    return std::nullopt;
  return value;
}

// The direction that compares b with a as `direction` compares a with b.
CompareFn swapped(CompareFn direction) {
  switch (direction) {
  case CompareFn::Lt:
    return CompareFn::Gt;
  case CompareFn::Le:
    return CompareFn::Ge;
  case CompareFn::Gt:
    return CompareFn::Lt;
  case CompareFn::Ge:
    return CompareFn::Le;
  default:
    return direction;
  }
}

const char *directionName(CompareFn direction) {
  static const char *names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  return names[static_cast<int>(direction)];
}

bool holds(CompareFn direction, Wide a, Wide b) {
  switch (direction) {
  case CompareFn::Eq:
    return a == b;
  case CompareFn::Ne:
    return a != b;
  case CompareFn::Lt:
    return a < b;
  case CompareFn::Le:
    return a <= b;
  case CompareFn::Gt:
    return a > b;
  case CompareFn::Ge:
    return a >= b;
  }
  return false;
}

// The smallest and largest value of an integer type.
std::pair<Wide, Wide> integerRange(DType dtype) {
  int bits = bitWidth(dtype);
  if (isUnsigned(dtype))
    return {0, (Wide(1) << bits) - 1};
  return {-(Wide(1) << (bits - 1)), (Wide(1) << (bits - 1)) - 1};
}

// ceil(a / b) for a >= 0, b > 0.
Wide ceilDiv(Wide a, Wide b) { return (a + b - 1) / b; }

std::string wideText(Wide value) {
  bool negative = value < 0;
  unsigned __int128 magnitude = negative ? -static_cast<unsigned __int128>(value) : value;
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(magnitude % 10)));
    magnitude /= 10;
  } while (magnitude != 0);
  return (negative ? "-" : "") + digits;
}

} // namespace

// The counter of `for (i = start; i <direction> bound; i += step)` and how
// many trips it makes, or why it makes no countable number: it never
// reaches the bound, or wraps around its type before it does.
Builder::TripCount Builder::countTrips(const LoopCounter &counter, double startValue) {
  Wide start = static_cast<Wide>(startValue), bound = static_cast<Wide>(counter.bound);
  Wide step = static_cast<Wide>(counter.step);
  auto [lowest, highest] = integerRange(counter.dtype);
  if (!holds(counter.direction, start, bound))
    return {0, ""};
  if (step == 0)
    return {-1, "the counter steps by 0, so the condition holds forever"};
  Wide trips = 0;
  switch (counter.direction) {
  case CompareFn::Eq:
    trips = 1;
    break;
  case CompareFn::Ne:
    if ((bound - start) % step != 0 || (bound - start) / step < 0)
      return {-1, fmt::format("the counter, from {} by {}, never equals {}", wideText(start), wideText(step),
                              wideText(bound))};
    trips = (bound - start) / step;
    break;
  case CompareFn::Lt:
  case CompareFn::Le:
    if (step < 0)
      return {-1, fmt::format("the counter, from {} by {}, moves away from the bound {}", wideText(start),
                              wideText(step), wideText(bound))};
    trips = counter.direction == CompareFn::Lt ? ceilDiv(bound - start, step) : (bound - start) / step + 1;
    break;
  case CompareFn::Gt:
  case CompareFn::Ge:
    if (step > 0)
      return {-1, fmt::format("the counter, from {} by {}, moves away from the bound {}", wideText(start),
                              wideText(step), wideText(bound))};
    trips = counter.direction == CompareFn::Gt ? ceilDiv(start - bound, -step) : (start - bound) / -step + 1;
    break;
  }
  Wide last = start + trips * step;
  if (last < lowest || last > highest)
    return {-1, fmt::format("the counter, from {} by {}, would wrap around its type {} before the condition fails",
                            wideText(start), wideText(step), hloTypeName(counter.dtype))};
  return {static_cast<int64_t>(std::min<Wide>(trips, std::numeric_limits<int64_t>::max())), ""};
}

// The counter of the loop: the tuple element the condition compares with a
// constant and the body steps by a constant, each looked through fusions,
// calls and copies; nullopt, with `why` set, when there is none.
std::optional<Builder::LoopCounter> Builder::loopCounter(const Computation &condition, const Computation &body,
                                                         std::string &why) const {
  Site written{&condition, &condition.instructions[condition.root], nullptr};
  Site root = lookThrough(module_, written).value_or(written);
  LoopCounter counter;
  std::optional<int64_t> element;
  std::optional<double> bound;
  if (root.ins->opcode == "compare" && root.ins->operands.size() == 2) {
    std::optional<Site> a = operandOf(module_, root, 0), b = operandOf(module_, root, 1);
    const Attribute *direction = findAttribute(*root.ins, "direction");
    static const std::map<std::string, CompareFn> directions = {{"EQ", CompareFn::Eq}, {"NE", CompareFn::Ne},
                                                                {"LT", CompareFn::Lt}, {"LE", CompareFn::Le},
                                                                {"GT", CompareFn::Gt}, {"GE", CompareFn::Ge}};
    auto found = direction ? directions.find(std::string(direction->text)) : directions.end();
    if (a && b && found != directions.end()) {
      if ((element = parameterElement(module_, *a)) && (bound = scalarConstant(b->ins)))
        counter.direction = found->second;
      else if ((element = parameterElement(module_, *b)) && (bound = scalarConstant(a->ins)))
        counter.direction = swapped(found->second);
    }
  }
  if (!element || !bound) {
    why = fmt::format("condition %{}'s ROOT %{} is not a compare of a tuple element with a constant", condition.name,
                      condition.instructions[condition.root].name);
    return std::nullopt;
  }
  counter.element = static_cast<size_t>(*element);
  counter.bound = *bound;
  std::optional<double> step;
  std::optional<Site> bodyRoot = lookThrough(module_, Site{&body, &body.instructions[body.root], nullptr});
  if (bodyRoot && bodyRoot->ins->opcode == "tuple" && counter.element < bodyRoot->ins->operands.size()) {
    std::optional<Site> next = operandOf(module_, *bodyRoot, counter.element);
    if (next && (next->ins->opcode == "add" || next->ins->opcode == "subtract")) {
      std::optional<Site> a = operandOf(module_, *next, 0), b = operandOf(module_, *next, 1);
      if (a && b && parameterElement(module_, *a) == element)
        step = scalarConstant(b->ins);
      else if (a && b && next->ins->opcode == "add" && parameterElement(module_, *b) == element)
        step = scalarConstant(a->ins);
      if (step && next->ins->opcode == "subtract")
        step = -*step;
    }
  }
  if (!step) {
    why = fmt::format("body %{} does not give back tuple element {}, the counter condition %{} compares, plus or "
                      "minus a constant",
                      body.name, counter.element, condition.name);
    return std::nullopt;
  }
  counter.step = *step;
  return counter;
}

// backend_config={"known_trip_count":{"n":"N"}}: the trip count XLA proved,
// or nullopt when the loop does not record one.
std::optional<int64_t> Builder::knownTripCount(const Instruction &ins) const {
  std::optional<Json> config = backendConfig(ins);
  const Json *known = config ? config->find("known_trip_count") : nullptr;
  if (!known)
    return std::nullopt;
  const Json *n = known->find("n");
  std::optional<double> count = n ? n->numeric() : std::nullopt;
  if (!count || *count < 0 || *count != std::trunc(*count) || *count > 0x1p62)
    fail(known->loc,
         fmt::format("while %{}: known_trip_count in its backend_config is not a whole number of trips", ins.name));
  return static_cast<int64_t>(*count);
}

Value Builder::whileLoop(const Instruction &ins, const std::vector<const Value *> &operands, int depth) {
  expectOperands(ins, 1);
  size_t conditionIndex = computationNamed(attribute(ins, "condition"));
  size_t bodyIndex = computationNamed(attribute(ins, "body"));
  const Computation &condition = module_.computations[conditionIndex];
  const Computation &body = module_.computations[bodyIndex];
  for (const Computation *computation : {&condition, &body})
    if (parameterCount(*computation) != 1)
      failOp(ins, fmt::format("%{} has {} parameters; a loop's condition and body take the loop-carried value alone",
                              computation->name, parameterCount(*computation)));
  const Value &initial = *operands[0];
  std::string why;
  std::optional<LoopCounter> found = initial.tensor ? std::nullopt : loopCounter(condition, body, why);
  std::optional<int64_t> known = knownTripCount(ins);
  TripCount trips;
  std::optional<int64_t> count; // the trip count, where it is known when the module is read
  if (found) {
    LoopCounter counter = *found;
    if (counter.element >= initial.elements.size())
      failOp(ins, fmt::format("condition %{} compares tuple element {} of a tuple of {}", condition.name,
                              counter.element, initial.elements.size()));
    const Value &start = initial.elements[counter.element];
    std::optional<Node> startNode;
    if (start.tensor && start.tensor->rank() == 0 && isInteger(start.tensor->dtype()))
      startNode = graph_->node(start.tensor->id());
    if (!startNode || startNode->kind != OpKind::Constant) {
      // Not an integer counter, or one that starts at a run-time value:
      // the loop runs at run time.
      found.reset();
    } else {
      counter.dtype = start.tensor->dtype();
      trips = countTrips(counter, startNode->value);
      if (trips.count < 0)
        failOp(ins, fmt::format("it does not end: {} (tuple element {}, {} {} in condition %{})", trips.why,
                                counter.element, directionName(counter.direction), counter.bound, condition.name));
      // The count the reader derives and the one XLA proved must agree.
      if (known && *known != trips.count)
        failOp(ins, fmt::format("its backend_config's known_trip_count is {}, but its counter (tuple element {}, "
                                "from {} by {}, {} {}) makes {} trips",
                                *known, counter.element, startNode->value, counter.step,
                                directionName(counter.direction), counter.bound, trips.count));
      count = trips.count;
    }
  }
  if (!found && known) // no counter the reader recognises: XLA's proved count is all there is
    trips.count = *(count = known);
  if (!count || *count > kMaxUnrolledTrips)
    return runtimeLoop(ins, conditionIndex, bodyIndex, initial, depth);

  // The condition as the graph computes it must agree with the count: true
  // before the first trip (if any), false after the last.
  // With only XLA's count to go on, a condition that is computed at run
  // time is taken on XLA's word, and one that folds to a constant is
  // checked before every trip.
  auto checkCondition = [&](const Value &state, bool expected, int64_t trip) {
    Value holds = evaluate(conditionIndex, {state}, depth + 1, ins.opcodeLoc);
    if (!holds.tensor || holds.tensor->dtype() != DType::i1 || holds.tensor->rank() != 0)
      failOp(ins, fmt::format("condition %{} does not return a pred[]", condition.name));
    const Node &node = graph_->node(holds.tensor->id());
    if (!found && node.kind != OpKind::Constant)
      return;
    if (node.kind != OpKind::Constant || (node.value != 0) != expected)
      failOp(ins, fmt::format("{}condition %{} does not give {} after {} trips, as {} says", found ? "internal: " : "",
                              condition.name, expected ? "true" : "false", trip,
                              found ? "its counter" : "its backend_config's known_trip_count"));
  };
  std::optional<Unrolling> outer = unrolling_;
  if (!unrolling_)
    unrolling_ = Unrolling{&ins, trips.count};
  Value state = initial;
  for (int64_t trip = 0; trip < trips.count; ++trip) {
    if (trip == 0 || !found)
      checkCondition(state, true, trip);
    state = evaluate(bodyIndex, {state}, depth + 1, ins.opcodeLoc);
  }
  checkCondition(state, false, trips.count);
  unrolling_ = outer;
  return state;
}

// The loop run at run time: the condition and the body recorded once each,
// into graphs of their own whose inputs are the carried tensors (the
// tuple's arrays, flattened in order), then one While node in the graph
// being built, whose results are given back in the tuple's structure.
Value Builder::runtimeLoop(const Instruction &ins, size_t conditionIndex, size_t bodyIndex, const Value &initial,
                           int depth) {
  const Computation &condition = module_.computations[conditionIndex];
  const Computation &body = module_.computations[bodyIndex];
  std::function<void(const Value &)> checkReadable = [&](const Value &value) {
    if (value.unread)
      failOp(ins, "its operand holds a library call's workspace or an asynchronous op's context, which a loop run at "
                  "run time cannot carry");
    for (const Value &element : value.elements)
      checkReadable(element);
  };
  checkReadable(initial);
  std::vector<Tensor> carried;
  flatten(initial, carried);
  if (carried.empty())
    failOp(ins, "it carries no arrays: a loop run at run time carries at least one");

  // graph_ is the region's while it is recorded, and the enclosing graph's
  // again after (also when recording fails).
  struct Restore {
    Graph *&graph;
    Graph *saved;
    ~Restore() { graph = saved; }
  } restore{graph_, graph_};
  Graph &outer = *graph_;
  // The carried value as the region sees it: the same structure, each
  // array an input of the region.
  auto parameterOf = [&](Graph &region) {
    size_t next = 0;
    std::function<Value(const Value &)> rebuild = [&](const Value &value) {
      if (value.tensor) {
        size_t i = next++;
        return tensorValue(region.input(fmt::format("carried{}", i), value.tensor->shape(), value.tensor->dtype()));
      }
      Value tuple;
      for (const Value &element : value.elements)
        tuple.elements.push_back(rebuild(element));
      return tuple;
    };
    return rebuild(initial);
  };

  auto conditionGraph = std::make_shared<Graph>(outer.name() + "_" + condition.name, outer.floatType());
  graph_ = conditionGraph.get();
  Value holds = evaluate(conditionIndex, {parameterOf(*conditionGraph)}, depth + 1, ins.opcodeLoc);
  if (!holds.tensor || holds.tensor->dtype() != DType::i1 || holds.tensor->rank() != 0)
    failOp(ins, fmt::format("condition %{} returns {}, not a pred[]", condition.name, valueShape(holds)));
  conditionGraph->output("holds", *holds.tensor);

  auto bodyGraph = std::make_shared<Graph>(outer.name() + "_" + body.name, outer.floatType());
  graph_ = bodyGraph.get();
  Value next = evaluate(bodyIndex, {parameterOf(*bodyGraph)}, depth + 1, ins.opcodeLoc);
  if (valueShape(next) != valueShape(initial))
    failOp(ins, fmt::format("body %{} returns {}, but the loop carries {}", body.name, valueShape(next),
                            valueShape(initial)));
  std::function<void(const Value &)> checkNext = [&](const Value &value) {
    if (value.unread)
      failOp(ins, fmt::format("body %{} returns a library call's workspace or an asynchronous op's context, which a "
                              "loop run at run time cannot carry",
                              body.name));
    for (const Value &element : value.elements)
      checkNext(element);
  };
  checkNext(next);
  std::vector<Tensor> results;
  flatten(next, results);
  for (size_t i = 0; i < results.size(); ++i)
    bodyGraph->output(fmt::format("next{}", i), results[i]);

  graph_ = &outer;
  std::vector<Tensor> finals = outer.whileLoop(carried, conditionGraph, bodyGraph);
  size_t taken = 0;
  std::function<Value(const Value &)> rebuild = [&](const Value &value) {
    if (value.tensor)
      return tensorValue(finals[taken++]);
    Value tuple;
    for (const Value &element : value.elements)
      tuple.elements.push_back(rebuild(element));
    return tuple;
  };
  return rebuild(initial);
}

// Element by element, `onTrue` where `pred` (a rank-0 i1) holds, else
// `onFalse`; the two have one shape (checked by the caller).
Value Builder::selectValue(Tensor pred, const Value &onTrue, const Value &onFalse) {
  if (onTrue.tensor)
    return tensorValue(graph_->select(pred, *onTrue.tensor, *onFalse.tensor));
  Value tuple;
  for (size_t i = 0; i < onTrue.elements.size(); ++i)
    tuple.elements.push_back(selectValue(pred, onTrue.elements[i], onFalse.elements[i]));
  return tuple;
}

std::vector<size_t> Builder::computationList(const Attribute &attribute) const {
  std::vector<std::string> names = parseAttribute(attribute, [&](Cursor &in) {
    std::vector<std::string> list;
    in.expect('{', "'{' opening the list of branch computations");
    do
      list.push_back(in.name("a computation name"));
    while (in.consume(','));
    in.expect('}', "',' or '}' in the list of branch computations");
    return list;
  });
  std::vector<size_t> indices;
  for (const std::string &name : names) {
    auto found = module_.byName.find(name);
    if (found == module_.byName.end())
      fail(attribute.valueLoc, fmt::format("there is no computation named %{}", name));
    indices.push_back(found->second);
  }
  return indices;
}

Value Builder::conditional(const Instruction &ins, const std::vector<const Value *> &operands, int depth) {
  Graph &g = *graph_;
  std::vector<size_t> branches;
  bool predicated = findAttribute(ins, "true_computation") != nullptr;
  if (predicated)
    branches = {computationNamed(attribute(ins, "true_computation")),
                computationNamed(attribute(ins, "false_computation"))};
  else if (const Attribute *list = findAttribute(ins, "branch_computations"))
    branches = computationList(*list);
  else
    failOp(ins, "it needs true_computation= and false_computation=, or branch_computations=");
  expectOperands(ins, branches.size() + 1);
  Tensor selector = tensorOperand(ins, operands, 0);
  if (selector.rank() != 0 || selector.dtype() != (predicated ? DType::i1 : DType::i32))
    failOp(ins, fmt::format("its {} is {}, not {}", predicated ? "predicate" : "branch index", describe(selector),
                            predicated ? "pred[]" : "s32[]"));

  std::vector<Value> results;
  for (size_t i = 0; i < branches.size(); ++i) {
    const Computation &branch = module_.computations[branches[i]];
    if (parameterCount(branch) != 1)
      failOp(ins, fmt::format("branch %{} has {} parameters; a branch takes its one operand", branch.name,
                              parameterCount(branch)));
    results.push_back(evaluate(branches[i], {*operands[i + 1]}, depth + 1, ins.opcodeLoc));
    if (valueShape(results[i]) != valueShape(results[0]))
      failOp(ins, fmt::format("branch %{} returns {}, but branch %{} returns {}", branch.name, valueShape(results[i]),
                              module_.computations[branches[0]].name, valueShape(results[0])));
  }
  // XLA runs the last branch for an index out of range.
  size_t last = branches.size() - 1;
  const Node &selectorNode = g.node(selector.id());
  if (selectorNode.kind == OpKind::Constant) {
    double index = selectorNode.value;
    if (predicated)
      return results[index != 0 ? 0 : 1];
    return results[index >= 0 && index < static_cast<double>(last) ? static_cast<size_t>(index) : last];
  }
  if (predicated)
    return selectValue(selector, results[0], results[1]);
  Value result = results[last];
  for (size_t i = last; i-- > 0;)
    result = selectValue(g.compare(CompareFn::Eq, selector, g.constant(static_cast<double>(i), DType::i32)), results[i],
                         result);
  return result;
}

// A value nothing reads: the context an asynchronous start hands its done,
// a library call's workspace.
Value Builder::placeholder() {
  Value unread;
  unread.unread = true;
  return unread;
}

// XLA's asynchronous pairs, read as the op they wrap: async-start with
// calls= (the computation inlined), OP-start for any op mlpipe reads
// (fusion-start, ...), each giving ((operands...), result, context...);
// OP-update and async-update passing that on; OP-done and async-done
// taking the result out. copy-start gives (copy, operand, context) and
// copy-done the copy. nullopt for any other opcode, and for the starts of
// ops mlpipe does not read (all-reduce-start, ...), refused by name.
std::optional<Value> Builder::asyncOp(const Instruction &ins, const std::vector<const Value *> &operands,
                                      const std::vector<Value> &arguments, bool isEntry, int depth) {
  const std::string &op = ins.opcode;
  auto suffixed = [&](std::string_view suffix) -> std::optional<std::string> {
    if (op.size() <= suffix.size() || op.compare(op.size() - suffix.size(), suffix.size(), suffix) != 0)
      return std::nullopt;
    std::string wrapped = op.substr(0, op.size() - suffix.size());
    if (wrapped != "async" && !findSupportedOp(wrapped))
      return std::nullopt;
    return wrapped;
  };
  if (auto wrapped = suffixed("-done")) {
    expectOperands(ins, 1);
    const Value &started = *operands[0];
    if (started.tensor || started.elements.size() < 2)
      failOp(ins, fmt::format("operand %{} is not the tuple an asynchronous start gives", ins.operands[0].name));
    return started.elements[*wrapped == "copy" ? 0 : 1];
  }
  if (auto wrapped = suffixed("-update")) {
    expectOperands(ins, 1);
    return *operands[0];
  }
  std::optional<std::string> wrapped = suffixed("-start");
  if (!wrapped)
    return std::nullopt;
  if (!ins.shape || !ins.shape->tuple || ins.shape->elements.size() < (*wrapped == "copy" ? 3u : 2u))
    failOp(ins, "its result must be the tuple an asynchronous start gives: (operands, result, context)");
  const std::vector<ShapeText> &parts = ins.shape->elements;
  Value result;
  if (*wrapped == "copy") { // (destination, source, context)
    expectOperands(ins, 1);
    result.elements = {*operands[0], *operands[0]};
  } else {
    Value done;
    if (*wrapped == "async") {
      done = inlineCall(ins, operands, depth);
    } else {
      Instruction inner = ins;
      inner.opcode = *wrapped;
      inner.shape = parts[1];
      done = buildChecked(inner, operands, arguments, isEntry, depth);
    }
    result.elements = {tupleOf(operands), done};
  }
  for (size_t i = result.elements.size(); i < parts.size(); ++i)
    result.elements.push_back(placeholder());
  return result;
}

} // namespace mlpipe::fe::hlo
