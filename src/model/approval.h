// Approvals (issue 7): a project group lists a resource group with
// `approval: required`; a member asks, a project-group admin or a platform
// admin approves (optionally until a time) or denies; until an approval
// holds, submissions there are refused with that reason.
#pragma once

#include <boost/describe.hpp>

#include <string>

#include "common/clock.h"

namespace cp {

BOOST_DEFINE_ENUM_CLASS(ApprovalState, pending, approved, denied, revoked)

struct Approval {
  std::string id;
  std::string project_group;
  std::string resource_group;
  std::string requested_by;
  std::string reason;  // why the requester needs it
  ApprovalState state = ApprovalState::pending;
  std::string decided_by;
  std::string note;        // the decider's words
  Millis expires_at = 0;   // approved until (0 = no end)
  Millis created_at = 0;
  Millis decided_at = 0;

  // An approval that lets submissions through at `now`.
  bool holds_at(Millis now) const {
    return state == ApprovalState::approved && (expires_at == 0 || now < expires_at);
  }
};
BOOST_DESCRIBE_STRUCT(Approval, (),
                      (id, project_group, resource_group, requested_by, reason, state, decided_by, note, expires_at,
                       created_at, decided_at))

}  // namespace cp
