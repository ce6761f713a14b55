#pragma once
// SIGINT / SIGTERM during `validate run` (what a CI cancel sends). The handler only records the
// signal; the exec runner forwards it to the program's process group, waits a grace period, then
// kills the group; the driver stops after that case, records it as interrupted and writes no
// manifest, so the run directory never claims a completion it did not reach (the
// program used to keep running forever after validate was gone).
namespace validate::runners {

// Installs the SIGINT/SIGTERM handlers (once per process; `validate run` calls it).
void install_interrupt_handlers();

// The signal that asked us to stop, 0 when none.
int interrupt_signal();

// Test hook: as if `sig` had arrived (0 clears).
void set_interrupt_signal(int sig);

// Seconds a program gets between the forwarded signal and SIGKILL.
inline constexpr double kInterruptGraceSeconds = 5.0;

}  // namespace validate::runners
