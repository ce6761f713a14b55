#include "validate/backends/interrupt.hpp"

#include <signal.h>

#include <atomic>

namespace validate::runners {

namespace {
std::atomic<int> g_signal{0};  // lock-free: the only thing the handler touches

extern "C" void on_interrupt(int sig) { g_signal.store(sig, std::memory_order_relaxed); }
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking wait returns EINTR and sees the flag
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }

void set_interrupt_signal(int sig) { g_signal.store(sig, std::memory_order_relaxed); }

}  // namespace validate::runners
