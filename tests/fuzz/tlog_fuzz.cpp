// libFuzzer target: what a verifier of the ledger's transparency log reads
// from strangers: signed notes and checkpoints (signed_note.h,
// checkpoint.h), proofs (merkle.h) and proof bundles (proof_bundle.h).
// The first byte picks the parser; the rest is its input.
// Invariants: no crash; what parses formats back to the same bytes (notes,
// checkpoints, proofs); a parsed bundle re-encodes to a bundle that parses;
// verification of arbitrary proofs and bundles never succeeds by accident
// against a root nobody signed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gatos/audit/proof_bundle.h"
#include "gatos/crypto/checkpoint.h"
#include "gatos/crypto/merkle.h"
#include "gatos/crypto/signed_note.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      auto n = gatos::ParseNote(text);
      if (n.ok() && gatos::FormatNote(*n) != text) abort();
      if (n.ok()) {
        gatos::NoteVerifierKey k;  // an all-zero key verifies nothing
        for (const auto& s : n->sigs) {
          k.name = s.name;
          k.key_id = s.key_id;
          if (gatos::VerifyNoteSignature(k, n->text, s).ok()) abort();
        }
      }
      break;
    }
    case 1: {
      auto c = gatos::ParseCheckpointText(text);
      if (c.ok() && gatos::FormatCheckpointText(*c) != text) abort();
      break;
    }
    case 2: {
      auto p = gatos::ParseMerkleProof(text);
      if (p.ok() && gatos::EncodeMerkleProof(*p) != text) abort();
      if (p.ok() && text.size() >= 16) {
        uint64_t index = 0, tree_size = 0;
        for (int i = 0; i < 8; ++i) index = (index << 8) | static_cast<uint8_t>(text[i]);
        for (int i = 8; i < 16; ++i) tree_size = (tree_size << 8) | static_cast<uint8_t>(text[i]);
        gatos::MerkleHash root = gatos::MerkleLeafHash("root nobody made");
        if (gatos::VerifyMerkleInclusion(index, tree_size, gatos::MerkleLeafHash(text), *p, root).ok()) abort();
        if (index > 0 && gatos::VerifyMerkleConsistency(index, tree_size, *p, gatos::MerkleLeafHash("a"), root).ok()) {
          abort();
        }
      }
      break;
    }
    case 3: {
      auto k = gatos::ParseNoteVerifierKey(text);
      if (k.ok() && gatos::FormatNoteVerifierKey(*k) != text) abort();
      break;
    }
    case 4: {
      auto b = gatos::ParseProofBundle(text);
      if (!b.ok()) break;
      if (!gatos::ParseProofBundle(gatos::EncodeProofBundle(*b)).ok()) abort();
      gatos::BundleVerifyOptions o;  // the all-zero ledger key signs nothing
      if (gatos::VerifyProofBundle(*b, o).ok()) abort();
      break;
    }
  }
  return 0;
}
