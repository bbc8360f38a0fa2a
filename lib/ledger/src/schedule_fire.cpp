#include "gatos/ledger/schedule_fire.h"

#include "gatos/crypto/sshsig.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"
#include "gatos/model/refs.h"
#include "gatos/model/time_format.h"
#include "gatos/model/trailers.h"
#include "gatos/sys/zoneinfo.h"

namespace gatos {
namespace {

constexpr char kName[] = "gatos ledger";
constexpr char kEmail[] = "ledger@gatos.invalid";

std::string Short(const std::string& id) { return id.substr(0, 12); }

}  // namespace

Result<ScheduleClock> LoadScheduleClock(const ScheduleSpec& spec) {
  if (spec.every_ms > 0) return ScheduleClock::Make(spec, TimeZone::Utc());
  GATOS_ASSIGN_OR_RETURN(TimeZone tz, LoadTimeZone(spec.tz));
  return ScheduleClock::Make(spec, tz);
}

Manifest FireManifest(const ScheduleSpec& spec, int64_t tick_ms, const std::optional<TriggerMove>& move) {
  if (move) return TriggeredManifest(spec.job, spec.name, move->url, move->ref, move->commit);
  return FiredManifest(spec, tick_ms);
}

Result<std::vector<GitObject>> BuildFireCommit(const ScheduleCommit& schedule, int64_t tick_ms,
                                               const std::string& previous_fire, const Ed25519PrivateKey& key,
                                               const std::optional<TriggerMove>& move) {
  const Manifest m = FireManifest(schedule.spec, tick_ms, move);
  std::vector<GitObject> objects;
  GATOS_ASSIGN_OR_RETURN(std::string tree,
                         BuildTreeObjects({{"job.yaml", ManifestJson(m).dump() + "\n", false}}, &objects));
  CommitMessage msg;
  msg.body = "gatos: fire " + schedule.spec.name + " at " + TickNonce(tick_ms);
  if (move) msg.body += " for " + move->ref + " at " + move->commit.substr(0, 12);
  msg.trailers = {{"Job-Id", "blake3:" + JobIdHex(m)},
                  {kScheduleTrailer, schedule.spec.name},
                  {kFiredAtTrailer, TickNonce(tick_ms)}};
  if (move) {
    msg.trailers.push_back({kTriggerUrlTrailer, move->url});
    msg.trailers.push_back({kTriggerRefTrailer, move->ref});
    msg.trailers.push_back({kTriggerCommitTrailer, move->commit});
  }
  std::vector<std::string> parents = {schedule.commit};
  if (!previous_fire.empty()) parents.push_back(previous_fire);
  GATOS_ASSIGN_OR_RETURN(GitObject c, BuildCommitObject(tree, parents, FormatCommitMessage(msg), kName, kEmail,
                                                        tick_ms, &key));
  objects.insert(objects.begin(), std::move(c));
  return objects;
}

bool IsFireMessage(std::string_view message) {
  auto m = ParseCommitMessage(message);
  if (!m.ok()) return false;
  for (const auto& t : m->trailers) {
    if (t.key == kScheduleTrailer) return true;
  }
  return false;
}

Result<FireCommit> ParseFireCommit(const ObjectLookup& lookup, const std::string& commit_id) {
  const std::string id = Short(commit_id);
  if (!IsLowerHex(commit_id, 40)) return InvalidArgumentError("a fire is a commit id (40 hex)");
  GATOS_ASSIGN_OR_RETURN(auto obj, lookup(commit_id));
  if (obj.first != ObjectType::kCommit) return InvalidArgumentError("fire " + id + " is not a commit");
  GATOS_ASSIGN_OR_RETURN(RawCommit c, ParseRawCommit(obj.second, commit_id));
  if (c.parents.empty() || c.parents.size() > 2) {
    return InvalidArgumentError("fire " + id + " must have the schedule commit and at most the previous fire as parents");
  }
  FireCommit out;
  out.commit = commit_id;
  out.schedule_commit = c.parents[0];
  if (c.parents.size() == 2) out.previous_fire = c.parents[1];
  GATOS_ASSIGN_OR_RETURN(auto tree, lookup(c.tree));
  if (tree.first != ObjectType::kTree) return InvalidArgumentError("fire " + id + ": its tree is not a tree");
  GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(tree.second, c.tree));
  const TreeEntry* file = nullptr;
  for (const auto& e : entries) {
    if (e.name == "job.yaml") file = &e;
  }
  if (!file || file->mode != 0100644) return InvalidArgumentError("fire " + id + ": no job.yaml (a regular file)");
  GATOS_ASSIGN_OR_RETURN(auto blob, lookup(file->id));
  if (blob.first != ObjectType::kBlob) return InvalidArgumentError("fire " + id + ": job.yaml is not a blob");
  GATOS_ASSIGN_OR_RETURN(out.manifest, ParseManifest(blob.second, "job.yaml"));
  out.job_hex = JobIdHex(out.manifest);
  GATOS_ASSIGN_OR_RETURN(CommitMessage m, ParseCommitMessage(c.message));
  GATOS_ASSIGN_OR_RETURN(std::string job_id, RequireUniqueTrailer(m.trailers, "Job-Id"));
  if (job_id != "blake3:" + out.job_hex) {
    return InvalidArgumentError("fire " + id + ": Job-Id is not the id of its job.yaml (blake3:" + out.job_hex + ")");
  }
  GATOS_ASSIGN_OR_RETURN(out.schedule, RequireUniqueTrailer(m.trailers, kScheduleTrailer));
  GATOS_ASSIGN_OR_RETURN(std::string at, RequireUniqueTrailer(m.trailers, kFiredAtTrailer));
  auto tick = ParseRfc3339Millis(at);
  if (!tick.ok()) return InvalidArgumentError("fire " + id + ": Fired-At: " + tick.status().message());
  out.tick_ms = *tick;
  int trigger_trailers = 0;
  for (const auto& t : m.trailers) {
    trigger_trailers += t.key == kTriggerUrlTrailer || t.key == kTriggerRefTrailer || t.key == kTriggerCommitTrailer;
  }
  if (trigger_trailers) {
    TriggerMove mv;
    auto url = RequireUniqueTrailer(m.trailers, kTriggerUrlTrailer);
    auto ref = RequireUniqueTrailer(m.trailers, kTriggerRefTrailer);
    auto commit = RequireUniqueTrailer(m.trailers, kTriggerCommitTrailer);
    if (!url.ok() || !ref.ok() || !commit.ok() || trigger_trailers != 3) {
      return InvalidArgumentError("fire " + id + ": Trigger-Url, Trigger-Ref and Trigger-Commit go together, once each");
    }
    if (!IsGitCommitId(*commit)) return InvalidArgumentError("fire " + id + ": Trigger-Commit is not a commit id");
    if (!IsValidUtf8(*url) || !IsValidUtf8(*ref) || !GitUrlProblem(*url).empty()) {
      return InvalidArgumentError("fire " + id + ": Trigger-Url or Trigger-Ref is not a valid url or ref name");
    }
    if (*ref != "HEAD" && !GitRefProblem(*ref).empty()) {
      return InvalidArgumentError("fire " + id + ": Trigger-Ref is not a ref name");
    }
    out.move = TriggerMove{*url, *ref, *commit};
  }
  if (!c.signature.empty()) {
    auto sig = ParseSshSignature(c.signature);
    if (!sig.ok()) return InvalidArgumentError("fire " + id + ": gpgsig: " + sig.status().message());
    Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
    if (!v.ok()) return InvalidArgumentError("fire " + id + ": its signature does not verify: " + v.message());
    out.signer_hex = sig->key.Hex();
  }
  return out;
}

Result<int64_t> FiredAtOf(const ObjectLookup& lookup, const std::string& commit) {
  GATOS_ASSIGN_OR_RETURN(auto obj, lookup(commit));
  if (obj.first != ObjectType::kCommit) return InvalidArgumentError("fire " + Short(commit) + " is not a commit");
  GATOS_ASSIGN_OR_RETURN(RawCommit c, ParseRawCommit(obj.second, commit));
  GATOS_ASSIGN_OR_RETURN(CommitMessage m, ParseCommitMessage(c.message));
  GATOS_ASSIGN_OR_RETURN(std::string at, RequireUniqueTrailer(m.trailers, kFiredAtTrailer));
  return ParseRfc3339Millis(at);
}

Decision CheckFire(const FireCommit& fire, const ScheduleCommit& schedule, const ScheduleClock& clock,
                   const std::string& ledger_key_hex, int64_t now_ms) {
  auto fail = [&](TransitionError e, std::string m) { return Decision{e, "fire " + Short(fire.commit) + ": " + m}; };
  if (fire.signer_hex != ledger_key_hex) {
    return fail(TransitionError::kUnauthorized,
                fire.signer_hex.empty() ? "it is not signed (a fire is signed by the ledger key)"
                                        : "it is signed by ed25519:" + fire.signer_hex + ", not the ledger key");
  }
  if (fire.schedule_commit != schedule.commit || fire.schedule != schedule.spec.name) {
    return fail(TransitionError::kInvalid, "it names schedule " + fire.schedule.substr(0, 64) + " at " +
                                               Short(fire.schedule_commit) + ", not the schedule in force (" +
                                               schedule.spec.name + " at " + Short(schedule.commit) + ")");
  }
  if (schedule.state != "active") {
    return fail(TransitionError::kInvalid, "schedule " + schedule.spec.name + " is " + schedule.state);
  }
  if (schedule.spec.is_trigger() != fire.move.has_value()) {
    return fail(TransitionError::kInvalid, schedule.spec.is_trigger()
                                               ? "schedule " + schedule.spec.name + " is a trigger; the fire names no moved ref"
                                               : "it names a moved ref, but schedule " + schedule.spec.name +
                                                     " is not a trigger");
  }
  if (fire.move) {
    const TriggerMove& mv = *fire.move;
    const WatchSpec* w = nullptr;
    for (const auto& x : schedule.spec.watch) {
      if (x.url == mv.url) w = &x;
    }
    if (!w) return fail(TransitionError::kInvalid, "schedule " + schedule.spec.name + " watches no " + mv.url.substr(0, 200));
    if (!WatchMatches(*w, mv.ref)) {
      return fail(TransitionError::kInvalid, mv.ref.substr(0, 200) + " matches no ref pattern schedule " +
                                                 schedule.spec.name + " watches in " + mv.url.substr(0, 200));
    }
    if (JobIdHex(FireManifest(schedule.spec, fire.tick_ms, mv)) != fire.job_hex) {
      return fail(TransitionError::kInvalid, "its job is not the template of schedule " + schedule.spec.name +
                                                 " pinned to " + mv.ref.substr(0, 200) + " at " + Short(mv.commit));
    }
    if (fire.tick_ms <= schedule.time_ms) {
      return fail(TransitionError::kInvalid, "Fired-At " + TickNonce(fire.tick_ms) + " is not after the schedule commit");
    }
    if (fire.tick_ms > now_ms) {
      return fail(TransitionError::kInvalid, "Fired-At " + TickNonce(fire.tick_ms) +
                                                 " is after the batch that records it (" + FormatRfc3339Millis(now_ms) + ")");
    }
    return {};
  }
  if (JobIdHex(FiredManifest(schedule.spec, fire.tick_ms)) != fire.job_hex) {
    return fail(TransitionError::kInvalid, "its job is not the template of schedule " + schedule.spec.name +
                                               " with the input of tick " + TickNonce(fire.tick_ms));
  }
  auto tick = clock.Next(fire.tick_ms - 1);
  if (!tick || *tick != fire.tick_ms) {
    return fail(TransitionError::kInvalid, TickNonce(fire.tick_ms) + " is not a tick of schedule " + schedule.spec.name);
  }
  if (fire.tick_ms <= schedule.time_ms) {
    return fail(TransitionError::kInvalid, "tick " + TickNonce(fire.tick_ms) + " is not after the schedule commit (" +
                                               FormatRfc3339Millis(schedule.time_ms) + ")");
  }
  if (fire.tick_ms > now_ms) {
    return fail(TransitionError::kInvalid, "tick " + TickNonce(fire.tick_ms) + " is after the batch that records it (" +
                                               FormatRfc3339Millis(now_ms) + ")");
  }
  return {};
}

nlohmann::json ScheduleListJson(Ledger& ledger, bool all, int64_t now_ms, std::vector<std::string>* problems) {
  using nlohmann::json;
  json out = json::array();
  auto refs = ledger.ListRefs(kSchedulePrefix);
  if (!refs.ok()) {
    problems->push_back(refs.status().message());
    return out;
  }
  for (const auto& ref : *refs) {
    auto at = ledger.ResolveRef(ref);
    if (!at.ok() || at->empty()) continue;
    auto c = CheckScheduleCommit(LedgerLookup(&ledger), *at);
    if (!c.ok()) {
      problems->push_back(ref + ": " + c.status().message());
      continue;
    }
    if (c->state == "removed" && !all) continue;
    json s = {{"name", c->spec.name},         {"state", c->state},   {"catch_up", CatchUpName(c->spec.catch_up)},
              {"signer", "ed25519:" + c->signer_hex}, {"commit", c->commit}, {"template", ManifestJson(c->spec.job)}};
    if (c->spec.is_trigger()) {
      json w = json::array();
      for (const auto& x : c->spec.watch) w.push_back({{"url", x.url}, {"refs", x.refs}});
      s["watch"] = w;
      s["poll"] = FormatEvery(c->spec.poll_ms);
      s["catch_up"] = "-";  // a trigger fires each move it sees; nothing to catch up
    } else if (c->spec.every_ms) {
      s["every"] = FormatEvery(c->spec.every_ms);
    } else {
      s["cron"] = c->spec.cron;
      s["tz"] = c->spec.tz;
    }
    std::optional<int64_t> last;
    s["last_fire"] = nullptr;
    auto fire = ledger.ResolveRef(kFirePrefix + c->spec.name);
    if (fire.ok() && !fire->empty()) {
      auto tick = FiredAtOf(LedgerLookup(&ledger), *fire);
      if (tick.ok()) {
        last = *tick;
        s["last_fire"] = FormatRfc3339Millis(*tick);
      }
      s["last_fire_commit"] = *fire;
    }
    std::optional<int64_t> next;
    int64_t overdue = 0;
    if (c->state == "active") {
      auto clock = LoadScheduleClock(c->spec);
      if (clock.ok()) {
        next = clock->Next(now_ms);
        int64_t from = std::max(c->time_ms, last.value_or(0));
        for (auto t = clock->Next(from); t && *t <= now_ms - kFireGraceMs && overdue < 100'000; t = clock->Next(*t)) {
          ++overdue;
        }
      } else {
        problems->push_back("schedule " + c->spec.name + ": " + clock.status().message());
      }
    }
    s["next_tick"] = next ? json(FormatRfc3339Millis(*next)) : json(nullptr);
    s["overdue"] = overdue;
    out.push_back(s);
  }
  return out;
}

}  // namespace gatos
