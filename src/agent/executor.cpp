#include "agent/executor.h"

namespace cp {

AttemptState reason_state(std::string_view reason) {
  if (reason == kStopPreempt) return AttemptState::Preempted;
  if (reason == kStopLost) return AttemptState::Lost;
  return AttemptState::Cancelled;  // cancel, superseded, and anything unknown
}

}  // namespace cp
