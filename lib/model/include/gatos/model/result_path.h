// The names a result tree may hold (PROTOCOL section 5): one rule for every
// side that writes or reads a result, so that what a worker builds is what
// the ledger accepts, refused with the same words on both sides.
//
//   - the worker, before it builds anything, refuses its job's outputs by it
//     (gatos/worker/output_collection.h), and the job ends `failed` with
//     this reason in its first epoch;
//   - BuildTreeObjects (gatos/git/result.h) builds no tree that breaks it;
//   - the ledger and the auditor refuse a poe.json that lists such a path
//     (ParsePoe, through CheckResultCommit), and the tree must equal that list.
//
// A result path is '/'-separated and relative, valid UTF-8 (the RFC 8785 rule
// poe.json's strings follow), without a NUL byte, and none of its components
// is empty (no leading, trailing or double '/'), ".", ".." or ".git" (git
// refuses a tree entry ".git": checking out such a tree would write into the
// repository that holds it).
//
// Thread-safety: pure functions.
#ifndef GATOS_RESULT_PATH_H_
#define GATOS_RESULT_PATH_H_

#include <string_view>

#include "gatos/model/status.h"

namespace gatos {

// OK, or InvalidArgument with one of these messages (the path quoted, at
// most 200 bytes of it, bytes that are not UTF-8 shown as U+FFFD):
//   result file path "P" is not valid UTF-8
//   result file path "P" holds a NUL byte
//   result file path "P" has an empty, '.', '..' or '.git' component, which a
//     result tree may not hold
Status CheckResultPath(std::string_view path);

}  // namespace gatos

#endif  // GATOS_RESULT_PATH_H_
