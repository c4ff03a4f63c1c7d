// versioning_pass.cpp — the LLVM pass plugin behind cairn/versioned.h: seed
// 004 §4.1's automatic in-place versioning, in its one-phase static form.
//
// Two passes, both in this plugin (clang-16 -fpass-plugin=libcairn_versioning.so):
//
//   cairn-tag (module, at the start of the pipeline, before SROA): each local
//     pointer variable annotated "cairn.versioned" must be assigned from an
//     allocation call whose size is visible (malloc, calloc, aligned_alloc,
//     new[]); the stored pointer is wrapped in a call
//     cairn_versioned_array(p, bytes, name, line, mode = -1), which survives
//     the optimiser and names the array for the second pass. The mark of the
//     main loop (cairn_main_loop_mark) gets attributes that keep it in place.
//
//   cairn-versioning (function, after the scalar optimisations: inlined,
//     loops simplified and rotated, not yet vectorised): finds the main loop
//     (the loop holding the mark), checks it can be resumed, classifies every
//     marked array and rewrites the loop:
//       versioned  (the basic rule, special case I): all updates of the array
//                  in one iteration are one loop nest F (or one memcpy/memset
//                  or store) that runs every iteration and writes the same
//                  elements every iteration (its addresses and trip counts are
//                  affine and do not depend on the main loop: ScalarEvolution).
//                  Reads before F use the consistent version, reads after F
//                  and all writes the working one. Inside F a read of the very
//                  element a store of the same inner iteration writes reads
//                  the working version if the store came first (special case
//                  I: post-update version switch), the consistent one if it
//                  comes later (F a single loop whose stride does not revisit
//                  an element). Elements F never writes are equal in both
//                  versions (both are filled from the array on entry and never
//                  written), so it does not matter which one reads them.
//       copy       (special case II and anything else not proven): the array
//                  lives in one plain region of the pool that commit copies
//                  with non-temporal stores; every access is redirected to it.
//     The refusals (an error naming the line and the array; nothing is
//     emitted): a marked pointer that escapes (stored, passed to a call in the
//     loop or to a capturing one outside it, mixed in a phi or select), an
//     access in the loop whose object may be a marked array but is not known
//     to be, a value other than the counter carried across iterations in a
//     register or used after the loop, a loop whose exit test the pass cannot
//     redo on resume, a marked array the loop never writes.
//
// Runtime (runtime.cpp): cairn_auto_enter(start, bound, step) before the loop opens the
// pool and returns the first iteration (start, or after the last committed
// one on resume), cairn_auto_consistent/working/plain give this iteration's
// buffers, cairn_auto_commit(next) ends each iteration, cairn_auto_exit()
// copies the final state back into the arrays.
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/AliasAnalysis.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Analysis/OptimizationRemarkEmitter.h>
#include <llvm/Analysis/ScalarEvolution.h>
#include <llvm/Analysis/ScalarEvolutionExpressions.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/DebugInfo.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/PassPlugin.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>

#include <map>
#include <string>
#include <vector>

using namespace llvm;

namespace {

constexpr const char* kPassName = "cairn-versioning";
constexpr const char* kTagFn = "cairn_versioned_array";
constexpr const char* kMarkFn = "cairn_main_loop_mark";

// Mode argument of the tag: decided by cairn-versioning.
enum Mode : int { kUndecided = -1, kVersioned = 0, kCopy = 1 };

std::string where(const Instruction* I) {
  if (const DebugLoc& DL = I->getDebugLoc()) return (DL->getFilename() + ":" + Twine(DL.getLine())).str();
  return "(line unknown: compile with -g)";
}

void error(Function& F, const Instruction* I, const Twine& msg) {
  F.getContext().diagnose(
      DiagnosticInfoUnsupported(F, "cairn-versioning: " + msg, I ? I->getDebugLoc() : DebugLoc(), DS_Error));
}

// ---------------------------------------------------------------- cairn-tag

const GlobalVariable* string_global(const Value* v) { return dyn_cast<GlobalVariable>(v->stripPointerCasts()); }

std::string string_of(const Value* v) {
  const GlobalVariable* g = string_global(v);
  if (!g || !g->hasInitializer()) return {};
  if (auto* cds = dyn_cast<ConstantDataSequential>(g->getInitializer()))
    if (cds->isString()) return cds->getAsCString().str();
  return {};
}

// Bytes allocated by a call to malloc/calloc/aligned_alloc/new[], or null.
Value* allocation_bytes(Value* v, IRBuilder<>& b) {
  auto* call = dyn_cast<CallBase>(v->stripPointerCasts());
  if (!call || !call->getCalledFunction()) return nullptr;
  const StringRef n = call->getCalledFunction()->getName();
  Type* i64 = b.getInt64Ty();
  auto arg = [&](unsigned i) { return b.CreateZExtOrTrunc(call->getArgOperand(i), i64); };
  if (n == "malloc" || n == "_Znam" || n == "_Znwm" || n == "_ZnamSt11align_val_t" || n == "_ZnwmSt11align_val_t")
    return arg(0);
  if (n == "calloc") return b.CreateMul(arg(0), arg(1));
  if (n == "aligned_alloc") return arg(1);
  return nullptr;
}

struct TagPass : PassInfoMixin<TagPass> {
  bool optimizing = true;
  PreservedAnalyses run(Module& M, ModuleAnalysisManager&) {
    LLVMContext& ctx = M.getContext();
    std::vector<CallInst*> annotations;
    for (Function& F : M)
      for (Instruction& I : instructions(F))
        if (auto* ii = dyn_cast<IntrinsicInst>(&I))
          if (ii->getIntrinsicID() == Intrinsic::var_annotation && string_of(ii->getArgOperand(1)) == "cairn.versioned")
            annotations.push_back(ii);
    Function* mark = M.getFunction(kMarkFn);
    if (annotations.empty() && !mark) return PreservedAnalyses::all();
    if (!optimizing) {
      Function& F = annotations.empty() ? *cast<CallBase>(*mark->user_begin())->getFunction()
                                        : *annotations.front()->getFunction();
      error(F, annotations.empty() ? nullptr : annotations.front(),
            "marked arrays or main loop need optimisation (-O1 or more): the pass runs after inlining");
      return PreservedAnalyses::all();
    }
    Type* ptr = PointerType::getUnqual(ctx);
    FunctionCallee tag = M.getOrInsertFunction(
        kTagFn,
        FunctionType::get(ptr, {ptr, Type::getInt64Ty(ctx), ptr, Type::getInt32Ty(ctx), Type::getInt32Ty(ctx)}, false));
    if (auto* tf = dyn_cast<Function>(tag.getCallee())) {
      tf->setDoesNotThrow();
      tf->addFnAttr(Attribute::WillReturn);
      tf->setMemoryEffects(MemoryEffects::inaccessibleMemOnly());
    }
    if (mark) {
      mark->setDoesNotThrow();
      mark->addFnAttr(Attribute::WillReturn);
      mark->addFnAttr(Attribute::NoDuplicate);
      mark->setMemoryEffects(MemoryEffects::inaccessibleMemOnly());
    }
    for (CallInst* ann : annotations) {
      Function& F = *ann->getFunction();
      auto* slot = dyn_cast<AllocaInst>(ann->getArgOperand(0)->stripPointerCasts());
      const unsigned line = static_cast<unsigned>(cast<ConstantInt>(ann->getArgOperand(3))->getZExtValue());
      std::string name;
      if (slot)
        for (DbgDeclareInst* d : FindDbgDeclareUses(slot)) name = d->getVariable()->getName().str();
      if (name.empty()) name = "line" + std::to_string(line);
      const std::string label =
          "'" + name + "' (" + string_of(ann->getArgOperand(2)) + ":" + std::to_string(line) + ")";
      if (!slot || !slot->getAllocatedType()->isPointerTy()) {
        error(F, ann, "CAIRN_VERSIONED on " + label + " marks a pointer variable holding the array; this is not one");
        continue;
      }
      std::vector<StoreInst*> stores;
      for (User* u : slot->users())
        if (auto* st = dyn_cast<StoreInst>(u); st && st->getPointerOperand() == slot) stores.push_back(st);
      unsigned tagged = 0;
      for (StoreInst* st : stores) {
        Value* v = st->getValueOperand();
        if (isa<ConstantPointerNull>(v)) continue;
        IRBuilder<> b(st);
        Value* bytes = allocation_bytes(v, b);
        if (!bytes) {
          error(F, st,
                "marked array " + label +
                    " is assigned a pointer that does not come from malloc, calloc, aligned_alloc or new[] here: "
                    "the pass must see the allocation to know the array's size; allocate it where it is declared");
          continue;
        }
        Value* label_str = b.CreateGlobalStringPtr(name, "cairn.name");
        CallInst* c = b.CreateCall(tag, {v, bytes, label_str, b.getInt32(line), b.getInt32(kUndecided)});
        st->setOperand(0, c);
        ++tagged;
      }
      if (tagged == 0) error(F, ann, "marked array " + label + " is never assigned an allocation");
      ann->eraseFromParent();
    }
    return PreservedAnalyses::none();
  }
};

// ---------------------------------------------------------------- cairn-versioning

struct Target {
  CallInst* tag = nullptr;  // cairn_versioned_array(...): the array's base pointer
  std::string name;
  unsigned line = 0;
  std::string label() const { return "'" + name + "' (line " + std::to_string(line) + ")"; }
  // Accesses inside the main loop: pointer operand index per instruction.
  struct Access {
    Instruction* inst;
    unsigned operand;  // which operand is the pointer
    bool write;
    bool consistent = false;  // read the consistent version
  };
  std::vector<Access> accesses;
  Mode mode = kVersioned;
  std::string why;  // the reason for copy mode, or the rule used
};

class Versioner {
 public:
  Versioner(Function& F, FunctionAnalysisManager& AM)
      : F_(F),
        LI_(AM.getResult<LoopAnalysis>(F)),
        DT_(AM.getResult<DominatorTreeAnalysis>(F)),
        SE_(AM.getResult<ScalarEvolutionAnalysis>(F)),
        ORE_(AM.getResult<OptimizationRemarkEmitterAnalysis>(F)) {}

  bool run();

 private:
  bool find_loop();
  bool collect(Target& t);
  bool check_aliasing();
  void classify(Target& t);
  void rewrite();
  Value* rebase(Value* p, Value* base, Value* newbase, Instruction* before);
  bool same_every_iteration(const SCEV* s);
  Loop* top_nest(BasicBlock* bb) const;
  bool runs_whole(Loop* inner, Loop* nest);
  void remark(const Target& t);

  Function& F_;
  LoopInfo& LI_;
  DominatorTree& DT_;
  ScalarEvolution& SE_;
  OptimizationRemarkEmitter& ORE_;
  CallInst* mark_ = nullptr;
  Loop* L_ = nullptr;
  PHINode* iv_ = nullptr;
  Instruction* ivnext_ = nullptr;
  ICmpInst* exit_cmp_ = nullptr;
  bool continue_on_true_ = true;
  std::vector<Target> targets_;
  bool failed_ = false;
};

bool Versioner::run() {
  for (Instruction& I : instructions(F_))
    if (auto* c = dyn_cast<CallInst>(&I); c && c->getCalledFunction()) {
      const StringRef n = c->getCalledFunction()->getName();
      if (n == kMarkFn) {
        if (mark_) {
          error(F_, c, "CAIRN_MAIN_LOOP appears twice in one function: mark one main loop");
          return false;
        }
        mark_ = c;
      } else if (n == kTagFn && isa<ConstantInt>(c->getArgOperand(4)) &&
                 cast<ConstantInt>(c->getArgOperand(4))->getSExtValue() == kUndecided) {
        Target t;
        t.tag = c;
        t.name = string_of(c->getArgOperand(2));
        t.line = static_cast<unsigned>(cast<ConstantInt>(c->getArgOperand(3))->getZExtValue());
        targets_.push_back(t);
      }
    }
  if (!mark_ && targets_.empty()) return false;
  if (!mark_) {
    error(F_, targets_.front().tag,
          "marked array " + targets_.front().label() +
              " but no CAIRN_MAIN_LOOP() in this function (after inlining): mark the loop that updates it");
    return false;
  }
  if (targets_.empty()) {
    error(F_, mark_, "CAIRN_MAIN_LOOP() at " + where(mark_) + " but no CAIRN_VERSIONED array in this function");
    return false;
  }
  if (!find_loop()) return false;
  for (Target& t : targets_)
    if (!collect(t)) failed_ = true;
  if (failed_ || !check_aliasing()) return false;
  for (Target& t : targets_) classify(t);
  if (failed_) return false;
  rewrite();
  for (const Target& t : targets_) remark(t);
  return true;
}

// The main loop and the form the resume needs: one latch that is the only
// exiting block, a counter phi, an exit test on counter.next against a bound
// defined before the loop, no other value carried in registers.
bool Versioner::find_loop() {
  L_ = LI_.getLoopFor(mark_->getParent());
  if (!L_) {
    error(F_, mark_, "CAIRN_MAIN_LOOP() at " + where(mark_) + " is not inside a loop");
    return false;
  }
  BasicBlock* latch = L_->getLoopLatch();
  if (!L_->getLoopPreheader() || !latch || L_->getExitingBlock() != latch || !L_->getUniqueExitBlock()) {
    error(F_, mark_,
          "the main loop at " + where(mark_) +
              " leaves from more than one place (break, return, goto): the pass can only commit and resume a "
              "loop whose only exit is its test");
    return false;
  }
  auto* br = dyn_cast<BranchInst>(latch->getTerminator());
  exit_cmp_ = br && br->isConditional() ? dyn_cast<ICmpInst>(br->getCondition()) : nullptr;
  if (exit_cmp_) continue_on_true_ = br->getSuccessor(0) == L_->getHeader();
  for (PHINode& phi : L_->getHeader()->phis()) {
    auto* next = dyn_cast<Instruction>(phi.getIncomingValueForBlock(latch));
    const bool counter = phi.getType()->isIntegerTy() && next && next->getOpcode() == Instruction::Add &&
                         next->getOperand(0) == &phi && isa<ConstantInt>(next->getOperand(1)) && exit_cmp_ &&
                         exit_cmp_->getOperand(0) == next && L_->isLoopInvariant(exit_cmp_->getOperand(1));
    if (counter && !iv_) {
      iv_ = &phi;
      ivnext_ = next;
      continue;
    }
    error(F_, &phi,
          "the main loop at " + where(mark_) +
              " carries a value other than its counter from one iteration to the next in a variable; it would be "
              "lost on resume: keep it in a marked array");
    return false;
  }
  if (!iv_) {
    error(F_, mark_,
          "the main loop at " + where(mark_) +
              " has no counter the pass can resume (write it as for (i = a; i < b; ++i) with b fixed)");
    return false;
  }
  for (PHINode& phi : L_->getUniqueExitBlock()->phis()) {
    error(F_, &phi,
          "a value computed in the main loop at " + where(mark_) +
              " is used after it; it would not be restored on resume: keep it in a marked array");
    return false;
  }
  return true;
}

// Every use of the marked pointer, followed through GEPs. Accesses inside the
// loop are recorded; anything that lets the pointer escape is refused.
bool Versioner::collect(Target& t) {
  SmallVector<Value*, 16> work{t.tag};
  SmallPtrSet<Value*, 32> seen;
  while (!work.empty()) {
    Value* v = work.pop_back_val();
    if (!seen.insert(v).second) continue;
    for (Use& u : v->uses()) {
      auto* I = dyn_cast<Instruction>(u.getUser());
      if (!I) continue;
      const bool in_loop = L_->contains(I);
      if (auto* gep = dyn_cast<GetElementPtrInst>(I)) {
        if (u.getOperandNo() == 0) {
          work.push_back(gep);
          continue;
        }
      } else if (auto* ld = dyn_cast<LoadInst>(I)) {
        if (in_loop) t.accesses.push_back({ld, ld->getPointerOperandIndex(), false});
        continue;
      } else if (auto* st = dyn_cast<StoreInst>(I)) {
        if (u.getOperandNo() == st->getPointerOperandIndex()) {
          if (in_loop) t.accesses.push_back({st, st->getPointerOperandIndex(), true});
          continue;
        }
      } else if (auto* mi = dyn_cast<MemIntrinsic>(I)) {
        if (in_loop) {
          if (mi->isVolatile()) {
            error(F_, I, "volatile memory operation on marked array " + t.label() + " at " + where(I));
            return false;
          }
          t.accesses.push_back({mi, u.getOperandNo(), u.getOperandNo() == 0});
        }
        continue;
      } else if (auto* call = dyn_cast<CallBase>(I)) {
        if (call == mark_) continue;
        const bool runtime = call->getCalledFunction() && call->getCalledFunction()->getName().startswith("cairn_");
        if (call->isLifetimeStartOrEnd() || isa<DbgInfoIntrinsic>(call)) continue;
        if (!in_loop && !runtime && call->isArgOperand(&u) && call->doesNotCapture(call->getArgOperandNo(&u)))
          continue;  // a call before or after the loop that does not keep the pointer
        const Function* callee = call->getCalledFunction();
        error(
            F_, I,
            "marked array " + t.label() + " escapes to a call of '" + (callee ? callee->getName() : "?") + "' at " +
                where(I) +
                (in_loop ? ": inside the main loop the pass cannot redirect the callee's accesses (make it inlinable: "
                           "static, defined in this file)"
                         : ": the callee may keep the pointer"));
        return false;
      } else if (isa<ICmpInst>(I)) {
        continue;  // comparing the pointer (null checks) reads no memory
      }
      error(F_, I,
            "marked array " + t.label() + " at " + where(I) +
                ": the pointer is stored, converted or mixed with another pointer; the pass cannot follow it");
      return false;
    }
  }
  if (!DT_.dominates(t.tag, L_->getLoopPreheader()->getTerminator())) {
    error(F_, t.tag, "marked array " + t.label() + " is not allocated on every path before the main loop");
    return false;
  }
  if (none_of(t.accesses, [](const Target::Access& a) { return a.write; })) {
    error(F_, t.tag,
          "marked array " + t.label() + " is never written in the main loop at " + where(mark_) +
              ": nothing to version; remove the mark");
    return false;
  }
  return true;
}

// Every other access in the loop must be to an object known not to be a
// marked array: otherwise it may read the array outside both versions.
bool Versioner::check_aliasing() {
  SmallPtrSet<Instruction*, 32> handled;
  for (const Target& t : targets_)
    for (const auto& a : t.accesses) handled.insert(a.inst);
  for (BasicBlock* bb : L_->blocks())
    for (Instruction& I : *bb) {
      SmallVector<Value*, 2> ptrs;
      if (auto* ld = dyn_cast<LoadInst>(&I))
        ptrs.push_back(ld->getPointerOperand());
      else if (auto* st = dyn_cast<StoreInst>(&I))
        ptrs.push_back(st->getPointerOperand());
      else if (auto* mt = dyn_cast<MemTransferInst>(&I)) {
        ptrs.push_back(mt->getRawDest());
        ptrs.push_back(mt->getRawSource());
      } else if (auto* ms = dyn_cast<MemSetInst>(&I))
        ptrs.push_back(ms->getRawDest());
      for (Value* p : ptrs) {
        const Value* obj = getUnderlyingObject(p, 0);
        if (any_of(targets_, [&](const Target& t) { return obj == t.tag; })) continue;
        if (isIdentifiedObject(obj)) continue;
        if (auto* c = dyn_cast<CallBase>(obj);
            c && c->getCalledFunction() && c->getCalledFunction()->getName() == kTagFn)
          continue;
        const std::string kind = isa<Argument>(obj)   ? "a parameter of the function"
                                 : isa<LoadInst>(obj) ? "a pointer loaded from memory"
                                                      : "a pointer computed in a way";
        error(F_, &I,
              "the access at " + where(&I) + " in the main loop goes through " + kind +
                  " the pass cannot tell apart from the marked arrays; use a local array, a global or a "
                  "malloc'ed pointer of this function");
        return false;
      }
    }
  return true;
}

// The outermost loop inside the main loop that holds bb (null: the main
// loop's own body).
Loop* Versioner::top_nest(BasicBlock* bb) const {
  Loop* l = LI_.getLoopFor(bb);
  if (l == L_) return nullptr;
  while (l && l->getParentLoop() != L_) l = l->getParentLoop();
  return l;
}

// The expression has the same value at the same point of every iteration of
// the main loop: no recurrence of the main loop, no value computed in it
// other than recurrences of inner loops whose trip counts are themselves so.
bool Versioner::same_every_iteration(const SCEV* s) {
  if (isa<SCEVCouldNotCompute>(s)) return false;
  bool ok = true;
  SmallPtrSet<const Loop*, 4> loops;
  auto visit = [&](const SCEV* e) {
    if (auto* ar = dyn_cast<SCEVAddRecExpr>(e)) {
      const Loop* l = ar->getLoop();
      if (l == L_ || !L_->contains(l) || !ar->isAffine()) ok = false;
      loops.insert(l);
    } else if (auto* u = dyn_cast<SCEVUnknown>(e)) {
      if (auto* I = dyn_cast<Instruction>(u->getValue()); I && L_->contains(I)) ok = false;
    }
    return ok;
  };
  struct Visitor {
    decltype(visit)& f;
    bool follow(const SCEV* e) { return f(e); }
    bool isDone() const { return false; }
  } v{visit};
  SCEVTraversal<Visitor> walk(v);
  walk.visitAll(s);
  if (!ok) return false;
  for (const Loop* l : loops) {
    const SCEV* btc = SE_.getBackedgeTakenCount(l);
    if (btc == s || !same_every_iteration(btc)) return false;
  }
  return true;
}

// Every iteration of `nest` runs all of `inner` and the loops between them,
// each loop to the end of its trip count.
bool Versioner::runs_whole(Loop* inner, Loop* nest) {
  for (Loop* l = inner; l; l = l->getParentLoop()) {
    if (!l->getExitingBlock() || l->getExitingBlock() != l->getLoopLatch()) return false;
    Loop* parent = l->getParentLoop();
    if (!parent) return false;
    if (l == nest) return true;  // whether the nest runs at all: the bypass check in classify()
    if (!DT_.dominates(l->getHeader(), parent->getLoopLatch())) return false;
  }
  return false;
}

void Versioner::classify(Target& t) {
  auto copy = [&](const Twine& why) {
    t.mode = kCopy;
    t.why = why.str();
  };
  // The update: one nest (or one straight-line instruction) holds every write.
  Loop* nest = nullptr;
  Instruction* single = nullptr;
  bool first = true;
  for (const auto& a : t.accesses) {
    if (!a.write) continue;
    Loop* n = top_nest(a.inst->getParent());
    if (first) {
      nest = n;
      single = n ? nullptr : a.inst;
      first = false;
      continue;
    }
    if (n != nest || !n) return copy("updated in more than one place of the iteration (special case II: non-uniform)");
  }
  // The update runs in every iteration or in none: every way around it is a
  // branch on a condition the main loop does not change (e.g. a zero-trip
  // guard). If it never runs, the array is never written and both versions
  // stay equal, so reading either is right.
  BasicBlock* update = nest ? nest->getHeader() : single->getParent();
  {
    SmallPtrSet<BasicBlock*, 32> to_update;
    SmallVector<BasicBlock*, 16> work{update};
    while (!work.empty()) {
      BasicBlock* bb = work.pop_back_val();
      if (!to_update.insert(bb).second || bb == L_->getHeader()) continue;
      for (BasicBlock* p : predecessors(bb))
        if (L_->contains(p) && !(nest && nest->contains(p))) work.push_back(p);
    }
    for (BasicBlock* bb : to_update) {
      if (bb == update) continue;
      auto* br = dyn_cast<BranchInst>(bb->getTerminator());
      if (!br) return copy("its update is reached through a switch or an indirect branch");
      if (!br->isConditional()) continue;
      const bool bypass = !to_update.count(br->getSuccessor(0)) || !to_update.count(br->getSuccessor(1));
      if (bypass && !L_->isLoopInvariant(br->getCondition()))
        return copy("its update does not run in every iteration (special case II: non-uniform)");
    }
  }
  // The written elements: the same every iteration.
  const SCEV* base = SE_.getSCEV(t.tag);
  std::vector<std::pair<Instruction*, const SCEV*>> stores;
  for (const auto& a : t.accesses) {
    if (!a.write) continue;
    if (nest && !runs_whole(LI_.getLoopFor(a.inst->getParent()), nest))
      return copy("its update loop may stop early or skip iterations");
    if (nest && !DT_.dominates(a.inst->getParent(), LI_.getLoopFor(a.inst->getParent())->getLoopLatch()))
      return copy("an update of it is conditional (special case II: non-uniform)");
    const SCEV* off = SE_.getMinusSCEV(SE_.getSCEV(a.inst->getOperand(a.operand)), base);
    if (!same_every_iteration(off))
      return copy("the pass cannot prove its update writes the same elements every iteration");
    if (auto* mi = dyn_cast<MemIntrinsic>(a.inst); mi && !same_every_iteration(SE_.getSCEV(mi->getLength())))
      return copy("the length of its memory copy changes between iterations");
    stores.push_back({a.inst, SE_.getSCEV(a.inst->getOperand(a.operand))});
  }
  // Reads.
  BasicBlock* from = nest ? nest->getHeader() : single->getParent();
  SmallPtrSet<BasicBlock*, 32> after;  // reachable from the update within one iteration
  {
    SmallVector<BasicBlock*, 16> work{from};
    while (!work.empty()) {
      BasicBlock* bb = work.pop_back_val();
      if (!after.insert(bb).second) continue;
      for (BasicBlock* s : successors(bb))
        if (L_->contains(s) && s != L_->getHeader()) work.push_back(s);
    }
  }
  bool special_one = false;
  for (auto& a : t.accesses) {
    if (a.write) continue;
    BasicBlock* bb = a.inst->getParent();
    const bool inside = nest ? nest->contains(bb) : a.inst == single;
    if (!inside) {
      const bool before_in_block = !nest && bb == single->getParent() && a.inst->comesBefore(single);
      if (before_in_block || !after.count(bb)) {
        a.consistent = true;
      } else {
        a.consistent = false;  // after the update (or the update never runs: equal versions)
      }
      continue;
    }
    if (!nest) return copy("it is read and written by one instruction");
    // Inside the update nest: only the element a store of the same inner
    // iteration writes (special case I).
    if (!isa<LoadInst>(a.inst)) return copy("its update loop also copies from it");
    const SCEV* p = SE_.getSCEV(a.inst->getOperand(a.operand));
    std::vector<Instruction*> same;  // stores of the same element in the same inner loop
    for (auto& [st, sp] : stores)
      if (sp == p && isa<StoreInst>(st) && cast<StoreInst>(st)->getValueOperand()->getType() == a.inst->getType() &&
          LI_.getLoopFor(st->getParent()) == LI_.getLoopFor(bb))
        same.push_back(st);
    if (same.empty())
      return copy("its update loop reads elements of it other than the one it is writing (special case II)");
    if (any_of(same, [&](Instruction* st) { return DT_.dominates(st, a.inst); })) {
      a.consistent = false;  // special case I: after the update, the working version
      special_one = true;
      continue;
    }
    // Before the store of its own inner iteration: consistent, if no earlier
    // inner iteration wrote the same element. F one loop, one address
    // expression {start,+,step} with |step| >= the element size.
    auto* ar = dyn_cast<SCEVAddRecExpr>(SE_.getMinusSCEV(p, base));
    bool injective = nest->getSubLoops().empty() && ar && ar->getLoop() == nest && ar->isAffine() &&
                     all_of(same, [&](Instruction* st) { return DT_.dominates(a.inst, st); });
    if (injective) {
      const auto* step = dyn_cast<SCEVConstant>(ar->getStepRecurrence(SE_));
      const uint64_t size = F_.getParent()->getDataLayout().getTypeStoreSize(a.inst->getType());
      injective = step && step->getAPInt().abs().uge(size);
    }
    for (auto& [s, sp] : stores)
      if (sp != p) injective = false;
    if (!injective) return copy("its update loop may read an element an earlier inner iteration wrote");
    a.consistent = true;  // the basic rule, element by element
  }
  t.mode = kVersioned;
  t.why = special_one ? "special case I (post-update version switch)" : "the basic rule";
}

Value* Versioner::rebase(Value* p, Value* base, Value* newbase, Instruction* before) {
  if (p == base) return newbase;
  auto* gep = cast<GetElementPtrInst>(p);
  Value* inner = rebase(gep->getPointerOperand(), base, newbase, before);
  auto* clone = cast<GetElementPtrInst>(gep->clone());
  clone->setOperand(0, inner);
  clone->insertBefore(before);
  return clone;
}

void Versioner::rewrite() {
  Module& M = *F_.getParent();
  LLVMContext& ctx = M.getContext();
  Type* ptr = PointerType::getUnqual(ctx);
  Type* i64 = Type::getInt64Ty(ctx);
  auto declare = [&](const char* name, Type* ret, ArrayRef<Type*> args, MemoryEffects me) {
    FunctionCallee c = M.getOrInsertFunction(name, FunctionType::get(ret, args, false));
    if (auto* f = dyn_cast<Function>(c.getCallee())) {
      f->setDoesNotThrow();
      f->addFnAttr(Attribute::WillReturn);
      f->setMemoryEffects(me);
    }
    return c;
  };
  const MemoryEffects inacc = MemoryEffects::inaccessibleMemOnly();
  FunctionCallee enter = declare("cairn_auto_enter", i64, {i64, i64, i64}, MemoryEffects::unknown());
  FunctionCallee consistent = declare("cairn_auto_consistent", ptr, {ptr}, inacc);
  FunctionCallee working = declare("cairn_auto_working", ptr, {ptr}, inacc);
  FunctionCallee plain = declare("cairn_auto_plain", ptr, {ptr}, inacc);
  FunctionCallee commit = declare("cairn_auto_commit", Type::getVoidTy(ctx), {i64}, MemoryEffects::unknown());
  FunctionCallee leave = declare("cairn_auto_exit", Type::getVoidTy(ctx), {}, MemoryEffects::unknown());
  FunctionCallee stream =
      declare("cairn_auto_stream_copy", Type::getVoidTy(ctx), {ptr, ptr, ptr, i64}, MemoryEffects::unknown());

  for (Target& t : targets_) t.tag->setArgOperand(4, ConstantInt::get(Type::getInt32Ty(ctx), t.mode));

  BasicBlock* pre = L_->getLoopPreheader();
  BasicBlock* header = L_->getHeader();
  BasicBlock* latch = L_->getLoopLatch();
  BasicBlock* exit = L_->getUniqueExitBlock();
  // Preheader: open the pool, learn the first iteration, test it as the latch would.
  BasicBlock* body_entry = SplitBlock(pre, pre->getTerminator(), &DT_, &LI_);
  IRBuilder<> b(pre->getTerminator());
  Value* start = iv_->getIncomingValueForBlock(body_entry);
  // The bound and step let the runtime refuse a saved counter outside this
  // run's range (a pool of a run with more iterations): with an exit test
  // `i != n` it would otherwise never end.
  Value* bound = b.CreateSExtOrTrunc(exit_cmp_->getOperand(1), i64);
  Value* step = b.CreateSExtOrTrunc(ivnext_->getOperand(1), i64);
  Value* first = b.CreateCall(enter, {b.CreateSExtOrTrunc(start, i64), bound, step});
  Value* first_iv = b.CreateTrunc(first, iv_->getType(), "cairn.first");
  iv_->setIncomingValue(iv_->getBasicBlockIndex(body_entry), first_iv);
  auto* test = cast<ICmpInst>(exit_cmp_->clone());
  test->setOperand(0, first_iv);
  b.Insert(test);
  pre->getTerminator()->eraseFromParent();
  b.SetInsertPoint(pre);
  if (continue_on_true_)
    b.CreateCondBr(test, body_entry, exit);
  else
    b.CreateCondBr(test, exit, body_entry);
  DT_.recalculate(F_);
  // Each iteration's versions.
  b.SetInsertPoint(&*header->getFirstInsertionPt());
  for (Target& t : targets_) {
    Value* c = nullptr;
    Value* w = nullptr;
    if (t.mode == kVersioned) {
      c = b.CreateCall(consistent, {t.tag}, t.name + ".consistent");
      w = b.CreateCall(working, {t.tag}, t.name + ".working");
    } else {
      c = w = b.CreateCall(plain, {t.tag}, t.name + ".plain");
    }
    for (auto& a : t.accesses) {
      Value* p = a.inst->getOperand(a.operand);
      a.inst->setOperand(a.operand, rebase(p, t.tag, a.consistent ? c : w, a.inst));
    }
    // An update that is one memcpy to the start of the array: the runtime
    // streams it with non-temporal stores when it covers the whole working
    // version, so commit has nothing to write back (Context::streamed).
    if (t.mode == kVersioned)
      for (auto& a : t.accesses)
        if (auto* mc = dyn_cast<MemCpyInst>(a.inst); mc && a.write && mc->getRawDest() == w) {
          IRBuilder<> sb(mc);
          CallInst* call =
              sb.CreateCall(stream, {t.tag, w, mc->getRawSource(), sb.CreateZExtOrTrunc(mc->getLength(), i64)});
          call->setDebugLoc(mc->getDebugLoc());
          a.inst = call;
          mc->eraseFromParent();
          break;
        }
  }
  // End of the iteration: commit with the next counter value.
  b.SetInsertPoint(latch->getTerminator());
  b.CreateCall(commit, {b.CreateSExtOrTrunc(ivnext_, i64)});
  b.SetInsertPoint(&*exit->getFirstInsertionPt());
  b.CreateCall(leave, {});
  mark_->eraseFromParent();
}

void Versioner::remark(const Target& t) {
  ORE_.emit([&] {
    OptimizationRemark r(kPassName, t.mode == kVersioned ? "Versioned" : "Copied", t.tag);
    if (t.mode == kVersioned) {
      unsigned reads_c = 0, reads_w = 0, writes = 0;
      for (const auto& a : t.accesses) (a.write ? writes : a.consistent ? reads_c : reads_w)++;
      r << "array " << t.label() << " versioned in place by " << t.why << ": " << std::to_string(reads_c)
        << " reads of the consistent version, " << std::to_string(reads_w) << " reads and " << std::to_string(writes)
        << " writes of the working version";
    } else {
      r << "array " << t.label() << " persisted by copy at each commit: " << t.why;
    }
    return r;
  });
}

struct VersioningPass : PassInfoMixin<VersioningPass> {
  PreservedAnalyses run(Function& F, FunctionAnalysisManager& AM) {
    if (F.isDeclaration()) return PreservedAnalyses::all();
    Versioner v(F, AM);
    return v.run() ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "cairn-versioning", "1", [](PassBuilder& pb) {
            pb.registerPipelineStartEPCallback([](ModulePassManager& mpm, OptimizationLevel level) {
              TagPass tag;
              tag.optimizing = level != OptimizationLevel::O0;
              mpm.addPass(std::move(tag));
            });
            pb.registerScalarOptimizerLateEPCallback(
                [](FunctionPassManager& fpm, OptimizationLevel) { fpm.addPass(VersioningPass()); });
            pb.registerPipelineParsingCallback(
                [](StringRef name, ModulePassManager& mpm, ArrayRef<PassBuilder::PipelineElement>) {
                  if (name != "cairn-tag") return false;
                  mpm.addPass(TagPass());
                  return true;
                });
            pb.registerPipelineParsingCallback(
                [](StringRef name, FunctionPassManager& fpm, ArrayRef<PassBuilder::PipelineElement>) {
                  if (name != "cairn-versioning") return false;
                  fpm.addPass(VersioningPass());
                  return true;
                });
          }};
}
