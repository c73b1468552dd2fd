#pragma once
// Fibers for the simulator (sim/world.hpp): many call stacks on one
// thread, switched by hand, so that thousands of simulated ranks run the
// real algorithm code one at a time, in the order the simulator decides.
// One thread and no locks make a run deterministic; a switch costs a few
// nanoseconds (x86-64: six registers and the stack pointer; elsewhere
// POSIX ucontext, slower by a system call per switch).
//
// A fiber must not switch inside a catch block: the C++ runtime keeps one
// list of the exceptions being handled per thread, not per stack.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <utility>

#include <ringtree/core/error.hpp>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__x86_64__)
// ringtree_sim_switch(&save, to): saves the callee-saved registers and the
// floating-point control words on the current stack, stores its pointer in
// *save, and resumes the stack `to` where it was saved. Weak: every
// translation unit that includes this header defines it, the linker keeps one.
asm(R"(
  .text
  .weak ringtree_sim_switch
  .type ringtree_sim_switch, @function
ringtree_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw 12(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw 12(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ringtree_sim_switch, .-ringtree_sim_switch
)");
extern "C" void ringtree_sim_switch(void** save, void* to);
#endif

namespace ringtree::sim {

// A fiber's stack: its own mapping, with a guard page below it so that an
// overflow faults instead of writing over a neighbour. Pages are touched
// only as deep as the code goes.
class stack {
 public:
  explicit stack(std::size_t bytes) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = (bytes + page - 1) / page * page + page;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw error("sim", -1, detail::cat("cannot map a fiber stack of ", bytes_, " bytes"));
    base_ = static_cast<std::byte*>(p);
    mprotect(base_, page, PROT_NONE);
    page_ = page;
  }
  stack(const stack&) = delete;
  stack& operator=(const stack&) = delete;
  ~stack() { munmap(base_, bytes_); }
  std::byte* lowest() const noexcept { return base_ + page_; }
  std::byte* top() const noexcept { return base_ + bytes_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0, page_ = 0;
};

// One call stack running `body` until it returns; resume() runs it until
// it calls suspend() (or returns), on the thread that called resume(). An
// exception that leaves the body comes out of that resume().
class fiber {
 public:
  fiber(std::function<void()> body, stack& s) : body_(std::move(body)) {
#if defined(__x86_64__)
    // The first switch "returns" into start(): below its address lie the
    // frame the switch restores: six registers and the control words.
    auto* top = reinterpret_cast<std::uintptr_t*>(s.top());
    *--top = 0;  // start's return address (it never returns): its frame is 16-aligned
    *--top = reinterpret_cast<std::uintptr_t>(&fiber::start);
    for (int i = 0; i < 6; ++i) *--top = 0;
    *--top = 0x037F'0000'1F80ULL;  // x87 control word at +12, MXCSR at +8: the defaults
    *--top = 0;
    sp_ = top;
#else
    getcontext(&uc_);
    uc_.uc_stack.ss_sp = s.lowest();
    uc_.uc_stack.ss_size = static_cast<std::size_t>(s.top() - s.lowest());
    uc_.uc_link = nullptr;
    makecontext(&uc_, &fiber::start, 0);
#endif
  }
  fiber(const fiber&) = delete;
  fiber& operator=(const fiber&) = delete;

  void resume() {
    fiber* outer = std::exchange(current(), this);
#if defined(__x86_64__)
    ringtree_sim_switch(&back_, sp_);
#else
    swapcontext(&back_uc_, &uc_);
#endif
    current() = outer;
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }
  // From inside the body: back to whoever resumed it.
  void suspend() {
#if defined(__x86_64__)
    ringtree_sim_switch(&sp_, back_);
#else
    swapcontext(&uc_, &back_uc_);
#endif
  }
  bool done() const noexcept { return done_; }
  // The fiber running now on this thread (nullptr outside fibers).
  static fiber*& current() noexcept {
    thread_local fiber* f = nullptr;
    return f;
  }

 private:
  static void start() {
    fiber* self = current();
    try {
      self->body_();
    } catch (...) {  // an exception must not leave the fiber's stack: resume() rethrows it
      self->failure_ = std::current_exception();
    }
    self->body_ = nullptr;  // what the body holds goes now, on this stack
    self->done_ = true;
    self->suspend();  // never resumed again
    std::terminate();
  }

  std::function<void()> body_;
  bool done_ = false;
  std::exception_ptr failure_;
#if defined(__x86_64__)
  void* sp_ = nullptr;
  void* back_ = nullptr;
#else
  ucontext_t uc_{}, back_uc_{};
#endif
};

}  // namespace ringtree::sim
