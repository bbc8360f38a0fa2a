// The ledger repository's git hooks. Pushes go to refs the ledger does not
// hide from receive-pack (refs/gatos/submit/<name> for jobs,
// refs/gatos/results/<job> for results); git hands them to proc-receive
// (receive.procReceiveRefs), so the push itself creates no ref: the hook
// passes each commit to the ledger's one writer (gatosd, or the writer lock
// when gatosd is down), which records it in the log.
#ifndef GATOS_GATOSD_HOOKS_H_
#define GATOS_GATOSD_HOOKS_H_

#include <iosfwd>

namespace gatos::gatosd {

// pre-receive: validates every pushed commit in git's quarantine (the
// objects of a refused push are discarded). Reads "<old> <new> <ref>" lines;
// writes what the pusher sees to `err`; non-zero refuses the whole push.
int RunPreReceive(std::istream& in, std::ostream& err);
// proc-receive: git's pkt-line protocol on in/out; records each pushed job
// or result through the writer and answers "ok" or "ng <reason>" per ref.
int RunProcReceive(std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_HOOKS_H_
