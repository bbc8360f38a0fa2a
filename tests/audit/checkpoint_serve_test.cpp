// gatosd signs checkpoints of its log's Merkle tree by itself while it
// serves, and serves them with the tree's tiles over HTTP (/tlog/): a
// holder of a proof bundle or a witness needs neither the ledger's host nor
// `gatos checkpoint`. Real processes: nats-server, gatosd serve, a worker,
// jobs pushed with git, the CLI.
#include <gtest/gtest.h>

#include <cstring>

#include "gatos/audit/log_tree.h"
#include "gatos/crypto/checkpoint.h"
#include "gatos/crypto/merkle.h"
#include "gatos/crypto/signed_note.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

TEST(CheckpointServeTest, GatosdSignsCheckpointsAndServesThemWithTheTiles) {
  Stack stack(StackOptions{.gatosd_args = {"--checkpoint-s", "1"}});
  ASSERT_TRUE(stack.Start());
  stack.StartWorker(0, {"--sandbox", "off"});
  const std::string id = stack.PushJob("command: [\"/bin/echo\", \"checkpointed\"]\ntimeout: 30\n");
  RunResult w = stack.Gatos({"wait", id, "--ledger", stack.nats_url(), "--timeout", "60"});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  RunOptions in_ledger;
  in_ledger.env = stack.env();
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"git", "--git-dir", stack.ledger()});
    return ::gatos::testing::Run(args, in_ledger);
  };

  // Within a few periods a checkpoint covers the log as it is now (the
  // result included); it is public: no token, only GET.
  // The log head's Log-Seq: the tree has one entry per log commit.
  auto log_size = [&] {
    return std::stoull("0" + TrimEnd(git({"log", "-1", "--format=%(trailers:key=Log-Seq,valueonly)", "refs/gatos/log"}).out));
  };
  std::string note;
  Checkpoint cp;
  ASSERT_TRUE(PollFor(20000, [&] {
    const std::string got = stack.HttpGet("/tlog/checkpoint");
    if (got.compare(0, 4, "200\n") != 0) return false;
    note = got.substr(4);
    auto n = ParseNote(note);
    auto c = n.ok() ? ParseCheckpointText(n->text) : Result<Checkpoint>(n.status());
    if (!c.ok()) return false;
    cp = *c;
    return cp.size == log_size();
  })) << note << "log head at " << log_size() << "\n" << stack.gatosd().log();

  // The served checkpoint is the ledger's: a proof bundle made against it
  // verifies offline with the ledger's public key.
  const std::string note_file = stack.dir().Join("served.note");
  const std::string bundle = stack.dir().Join("job.bundle");
  WriteFile(note_file, note);
  RunResult proof = stack.Gatos({"proof", id, "--repo", stack.ledger(), "--checkpoint", note_file, "-o", bundle});
  ASSERT_EQ(proof.exit_code, 0) << proof.err;
  RunResult check = stack.Gatos({"verify", "--bundle", bundle, "--ledger-key", stack.ledger() + "/gatos/ledger_key.pub"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  // Level-0 tile: entry 0's hash is RFC 6962's leaf hash of the first log
  // commit as git stores it.
  ASSERT_LT(cp.size, 256u);
  const std::string tile = stack.HttpGet("/tlog/" + TlogTilePath(0, 0, static_cast<int>(cp.size)));
  ASSERT_EQ(tile.compare(0, 4, "200\n"), 0) << tile.substr(0, 200);
  ASSERT_EQ(tile.size() - 4, 32 * cp.size);
  const std::string chain = git({"log", "--first-parent", "--format=%H %s", "refs/gatos/log"}).out;
  const size_t first = chain.find(" gatos log 1: ");
  ASSERT_NE(first, std::string::npos) << chain;
  const std::string root = chain.substr(first - 40, 40);  // Log-Seq 1
  const MerkleHash leaf = MerkleLeafHash(git({"cat-file", "commit", root}).out);
  EXPECT_EQ(std::memcmp(tile.data() + 4, leaf.data(), 32), 0);

  // What the network may not name: other files, other spellings.
  for (const char* bad : {"/tlog/state", "/tlog/entries", "/tlog/lock", "/tlog/tile/0/0", "/tlog/tile/0/../../gatos/ledger_key",
                          "/tlog/tile/0/x000/000", "/tlog/tile/9/000"}) {
    EXPECT_EQ(stack.HttpGet(bad).substr(0, 4), "404\n") << bad;
  }
}

}  // namespace
}  // namespace gatos::testing
