// libFuzzer target: fire commits as the auditor and gatosd read them
// (gatos/ledger/schedule_fire.h ParseFireCommit, FiredAtOf). The input is
// a commit object's bytes, then "\0\0", then the job.yaml its tree holds
// (every id but the commit's resolves to that tree, and the tree's blob to
// the job.yaml). Accepted fires name a job id that is their job.yaml's and
// a tick FiredAtOf reads back; nothing crashes or hangs on any input. A
// genuine fire (BuildFireCommit), of a tick or of a trigger, always parses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gatos/git/git_object.h"
#include "gatos/git/result.h"
#include "gatos/ledger/schedule_fire.h"
#include "gatos/model/manifest.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

const std::string kCommit(40, 'a');

void Genuine() {
  static bool done = false;
  if (done) return;
  done = true;
  auto key = gatos::GenerateEd25519Key("fuzz");
  Check(key.ok());
  gatos::ScheduleCommit sc;
  sc.commit = std::string(40, 'b');
  sc.spec.name = "tick";
  sc.spec.every_ms = 1000;
  auto m = gatos::ParseManifest("command: [\"true\"]\ntimeout: 10\n", "job.yaml");
  Check(m.ok());
  sc.spec.job = *m;
  auto objects = gatos::BuildFireCommit(sc, 1'795'000'000'000, std::string(40, 'c'), *key);
  Check(objects.ok());
  auto f = gatos::ParseFireCommit(gatos::BatchLookup(&*objects, nullptr), objects->front().id);
  Check(f.ok() && f->tick_ms == 1'795'000'000'000 && f->signer_hex == key->public_key().Hex() &&
        f->previous_fire == std::string(40, 'c') && f->schedule_commit == sc.commit && !f->move);
  // A trigger's fire: its Trigger-* trailers read back.
  sc.spec.every_ms = 0;
  sc.spec.watch = {{"/srv/app", {"refs/heads/*"}}};
  sc.spec.poll_ms = 1000;
  const gatos::TriggerMove mv{"/srv/app", "refs/heads/main", std::string(40, 'd')};
  objects = gatos::BuildFireCommit(sc, 1'795'000'000'000, "", *key, mv);
  Check(objects.ok());
  f = gatos::ParseFireCommit(gatos::BatchLookup(&*objects, nullptr), objects->front().id);
  Check(f.ok() && f->move && *f->move == mv && f->job_hex == gatos::JobIdHex(gatos::FireManifest(sc.spec, 0, mv)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Genuine();
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t cut = in.find(std::string_view("\0\0", 2));
  const std::string commit(in.substr(0, cut));
  const std::string yaml(cut == std::string_view::npos ? std::string_view() : in.substr(cut + 2));
  std::vector<gatos::GitObject> tree_objects;
  auto tree = gatos::BuildTreeObjects({{"job.yaml", yaml, false}}, &tree_objects);
  Check(tree.ok());
  gatos::ObjectLookup lookup = [&](const std::string& id) -> gatos::Result<std::pair<gatos::ObjectType, std::string>> {
    if (id == kCommit) return std::make_pair(gatos::ObjectType::kCommit, commit);
    for (const auto& o : tree_objects) {
      if (o.id == id) return std::make_pair(o.type, o.data);
    }
    for (const auto& o : tree_objects) {
      if (o.id == *tree) return std::make_pair(o.type, o.data);
    }
    return gatos::NotFoundError(id);
  };
  auto f = gatos::ParseFireCommit(lookup, kCommit);
  if (!f.ok()) return 0;
  Check(f->job_hex == gatos::JobIdHex(f->manifest));
  auto at = gatos::FiredAtOf(lookup, kCommit);
  Check(at.ok() && *at == f->tick_ms);
  return 0;
}
