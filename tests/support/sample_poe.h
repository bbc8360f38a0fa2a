// A complete, valid proof of execution for tests that need one and vary a
// field or two. Header-only: the model is all it needs.
#ifndef GATOS_TESTS_SAMPLE_POE_H_
#define GATOS_TESTS_SAMPLE_POE_H_

#include <string>

#include "gatos/model/blake3.h"
#include "gatos/model/poe.h"

namespace gatos {

inline Poe SamplePoe() {
  Poe p;
  p.job_id = "blake3:" + std::string(64, 'a');
  p.worker_id = "ed25519:" + std::string(64, 'b');
  p.lease_epoch = 2;
  p.status = "succeeded";
  p.runner_program = "blake3:" + std::string(64, 'c');
  p.runner_version = "0.1.0";
  p.runner_platform = "linux-x86_64";
  p.exit_code = 0;
  p.stdout_cap = 1 << 20;
  p.started_at = "2026-11-22T02:00:00.000Z";
  p.finished_at = "2026-11-22T02:00:01.500Z";
  p.outputs = {{"outputs/report.txt", 3, Blake3Tagged("abc")},
               {"stderr", 0, Blake3Tagged("")},
               {"stdout", 6, Blake3Tagged("hello\n")}};
  return p;
}

// SamplePoe listing one output of one byte, at `path`.
inline Poe SamplePoeListing(const std::string& path) {
  Poe p = SamplePoe();
  p.outputs = {{path, 1, Blake3Tagged("x")}};
  return p;
}

}  // namespace gatos

#endif  // GATOS_TESTS_SAMPLE_POE_H_
