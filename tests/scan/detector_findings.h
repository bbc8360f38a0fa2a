// What a detector finds in a text, as "rule-id:secret" strings in match
// order: the form the scanner's rule tests compare against.
#ifndef GATOS_TESTS_SCAN_DETECTOR_FINDINGS_H_
#define GATOS_TESTS_SCAN_DETECTOR_FINDINGS_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gatos/scan/detector.h"

namespace gatos::scan {

inline std::vector<std::string> DetectorFindings(const Detector& detector,
                                                 Detector::Scratch* scratch,
                                                 const std::string& text,
                                                 const std::string& path = "") {
  std::vector<Match> m;
  EXPECT_TRUE(detector.Scan(text, path, scratch, &m).ok());
  std::vector<std::string> out;
  for (const Match& x : m) {
    out.push_back(detector.rules().rules[x.rule].id + ":" + text.substr(x.start, x.end - x.start));
  }
  return out;
}

}  // namespace gatos::scan

#endif  // GATOS_TESTS_SCAN_DETECTOR_FINDINGS_H_
