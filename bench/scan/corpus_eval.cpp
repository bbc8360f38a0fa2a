// scan_corpus_eval: scores one gatos-scan run over a corpus repository
// against the committed labels (bench/scan/corpus/labels.jsonl): precision
// per rule by finding and by distinct secret, the labelled true secrets
// found, and every missing true, found false and unlabelled finding (rule,
// path, commit, BLAKE3 of the match; never the match). run_corpus_bench.sh
// runs it after each scan; it prints figures and exits 0 unless its inputs
// cannot be read.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gatos/model/secret_groups.h"
#include "gatos/scan/labels.h"
#include "gatos/sys/flags.h"

namespace {

constexpr const char* kUsage = R"(usage: scan_corpus_eval --labels FILE --corpus NAME --repo GITDIR
                        --findings FILE [--stubs FILE] [--json]

Scores the findings.jsonl of a gatos-scan run over corpus repository NAME
(its git directory GITDIR holds the scanned blobs) against the labels of
NAME in FILE. --stubs writes a label line for each unlabelled finding, to
read, complete and append. --json prints the scores as one JSON object.
)";

int Fail(const std::string& msg) {
  std::cerr << "scan_corpus_eval: " << msg << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  gatos::Flags flags;
  if (!flags.Parse(args, {{"labels"}, {"corpus"}, {"repo"}, {"findings"}, {"stubs"}, {"json", 0, false}})) {
    std::cerr << "scan_corpus_eval: " << flags.error() << "\n" << kUsage;
    return 2;
  }
  if (flags.help()) {
    std::cout << kUsage;
    return 0;
  }
  auto labels_file = flags.Get("labels"), corpus = flags.Get("corpus"), repo = flags.Get("repo"),
       findings_file = flags.Get("findings");
  if (!labels_file || !corpus || !repo || !findings_file) {
    std::cerr << "scan_corpus_eval: --labels, --corpus, --repo and --findings are required\n" << kUsage;
    return 2;
  }
  gatos::Result<std::vector<gatos::scan::Label>> labels = gatos::scan::LoadLabelsFile(*labels_file);
  if (!labels.ok()) return Fail(labels.status().message());
  std::ifstream in(*findings_file, std::ios::binary);
  if (!in) return Fail("cannot read " + *findings_file);
  std::ostringstream text;
  text << in.rdbuf();
  gatos::Result<std::vector<gatos::FindingLocation>> locations = gatos::ParseFindingsJsonl(text.str());
  if (!locations.ok()) return Fail(*findings_file + ": " + locations.status().message());
  gatos::Result<std::vector<gatos::scan::HashedFinding>> hashed = gatos::scan::HashMatches(*repo, *locations);
  if (!hashed.ok()) return Fail(hashed.status().message());
  const gatos::scan::LabelReport report = gatos::scan::EvaluateLabels(*corpus, *labels, *hashed);
  if (flags.Has("json")) {
    nlohmann::json rules = nlohmann::json::object();
    for (const auto& [rule, s] : report.by_rule) {
      rules[rule] = {{"precision", s.precision()}, {"true", s.true_findings}, {"false", s.false_findings},
                     {"unlabelled", s.unlabelled_findings}, {"secret_precision", s.secret_precision()}};
    }
    std::cout << nlohmann::json{{"corpus", report.corpus},
                                {"precision", report.total.precision()},
                                {"secret_precision", report.total.secret_precision()},
                                {"findings", hashed->size()},
                                {"true_findings", report.total.true_findings},
                                {"false_findings", report.total.false_findings},
                                {"unlabelled_findings", report.total.unlabelled_findings},
                                {"true_labels", report.true_labels},
                                {"true_found", report.true_labels - report.missing_true.size()},
                                {"rules", rules}}
                     .dump()
              << "\n";
  } else {
    std::cout << gatos::scan::FormatLabelReport(report);
  }
  if (auto stubs = flags.Get("stubs")) {
    std::ofstream out(*stubs, std::ios::binary | std::ios::trunc);
    out << gatos::scan::LabelStubs(report);
    if (!out) return Fail("cannot write " + *stubs);
  }
  return 0;
}
