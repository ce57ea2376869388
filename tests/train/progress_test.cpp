#include "artel/train/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace artel::train {
namespace {

TEST(Progress, PlainLinesEveryNStepsAndAtTheEnd) {
  std::ostringstream os;
  Progress p({.total_steps = 10, .unit = "tok/s", .terminal = false, .log_every = 4}, os);
  for (int k = 1; k <= 10; ++k) p.step(k, 2.5, 1200);
  p.eval(10, 1.25, std::nullopt);
  p.finish();
  std::string s = os.str();
  EXPECT_EQ(s.find('\r'), std::string::npos);
  EXPECT_EQ(s.find('\033'), std::string::npos);
  // steps 1 (first), 4, 8 and 10 (last), then the eval line
  EXPECT_NE(s.find("step 1/10 | loss 2.5000 | 1200.0 tok/s"), std::string::npos);
  EXPECT_NE(s.find("step 4/10"), std::string::npos);
  EXPECT_NE(s.find("step 8/10"), std::string::npos);
  EXPECT_NE(s.find("step 10/10 | loss"), std::string::npos);
  EXPECT_EQ(s.find("step 5/10"), std::string::npos);
  EXPECT_NE(s.find("step 10/10 | val_loss 1.2500\n"), std::string::npos);
}

TEST(Progress, TerminalBarIsRedrawnInPlace) {
  std::ostringstream os;
  Progress p({.total_steps = 3, .terminal = true, .redraw_s = 0}, os);
  p.step(1, 3.0, 10);
  p.step(2, 2.0, 10);
  p.eval(2, 1.5, 0.75);
  p.step(3, 1.0, 10);
  p.finish();
  std::string s = os.str();
  EXPECT_NE(s.find("\r\033[K["), std::string::npos);
  EXPECT_NE(s.find("] step 3/3 | loss 1.0000"), std::string::npos);
  EXPECT_NE(s.find("########################]"), std::string::npos);  // full at the end
  EXPECT_NE(s.find("val_accuracy 0.7500\n"), std::string::npos);
  EXPECT_EQ(s.back(), '\n');
}

TEST(Progress, FormatsDurationsAndRates) {
  EXPECT_EQ(Progress::format_duration(12.4), "12s");
  EXPECT_EQ(Progress::format_duration(245), "4:05");
  EXPECT_EQ(Progress::format_duration(3723), "1:02:03");
  EXPECT_EQ(Progress::format_duration(NAN), "?");
  EXPECT_EQ(Progress::format_rate(950), "950.0");
  EXPECT_EQ(Progress::format_rate(12345), "12.3k");
}

}  // namespace
}  // namespace artel::train
