#include "validate/runners/runner.hpp"

namespace validate::runners {

const char* outcome_name(RunOutcome o) {
  switch (o) {
    case RunOutcome::ok: return "ok";
    case RunOutcome::error: return "error";
    case RunOutcome::skipped: return "skipped";
    case RunOutcome::unsupported: return "unsupported";
  }
  return "?";
}

}  // namespace validate::runners
