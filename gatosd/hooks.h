// The git hooks of the ledger's push front door (<ledger>/push) and of the
// ledger itself. Pushes go to refs/gatos/submit/<name> for jobs,
// refs/gatos/results/<job> for results and refs/gatos/witnesses/<key>; git
// hands them to proc-receive (receive.procReceiveRefs), so the push itself
// creates no ref: the hook passes each commit to the ledger's one writer
// (gatosd, or the writer lock when gatosd is down), which records it in the
// log.
//
// `ledger_dir`: the ledger, for the front door's hooks (which run in the
// front door); "" for the ledger's own hooks (the ledger is GIT_DIR).
#ifndef GATOS_GATOSD_HOOKS_H_
#define GATOS_GATOSD_HOOKS_H_

#include <iosfwd>
#include <string>

namespace gatos::gatosd {

// pre-receive: validates every pushed commit in git's quarantine (the
// objects of a refused push are discarded). Reads "<old> <new> <ref>" lines;
// writes what the pusher sees to `err`; non-zero refuses the whole push.
int RunPreReceive(const std::string& ledger_dir, std::istream& in, std::ostream& err);
// proc-receive: git's pkt-line protocol on in/out; records each pushed job
// or result through the writer and answers "ok" or "ng <reason>" per ref.
int RunProcReceive(const std::string& ledger_dir, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_HOOKS_H_
