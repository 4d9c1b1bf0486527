// LineChild (kernels/common/child.h): a real child process answering line by line, as the PyTorch
// peer serves one epoch per request.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <stdexcept>
#include <string>

#include "kernels/common/child.h"

using dlb::LineChild;

TEST(LineChild, AnswersEachLineInTurn) {
  LineChild c({"bash", "-c", "while read -r l; do echo \"got $l\"; done; echo bye"});
  std::string line;
  for (const char* req : {"epoch", "two words", "3"}) {
    ASSERT_TRUE(c.send(req));
    ASSERT_TRUE(c.read_line(&line));
    EXPECT_EQ(line, std::string("got ") + req);
  }
  std::string rest;
  const int st = c.finish(&rest);  // end of input ends its loop
  EXPECT_EQ(rest, "bye\n");
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

TEST(LineChild, AChildThatLeftIsSeenNotFatal) {
  // It exits without reading: its last line has no newline, a send meets a closed pipe (EPIPE, not
  // a SIGPIPE that would end this test process), and its exit status is kept.
  LineChild c({"bash", "-c", "printf 'first\\nlast'; exit 3"});
  std::string line;
  ASSERT_TRUE(c.read_line(&line));
  EXPECT_EQ(line, "first");
  ASSERT_TRUE(c.read_line(&line));
  EXPECT_EQ(line, "last");
  EXPECT_FALSE(c.read_line(&line));
  bool sent = true;
  for (int i = 0; i < 64 && sent; ++i) sent = c.send(std::string(4096, 'x'));  // past any pipe buffer
  EXPECT_FALSE(sent);
  const int st = c.finish();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
  EXPECT_EQ(c.finish(), st);  // finishing twice: the same status, no second wait
}

TEST(LineChild, StderrIsReadToo) {
  LineChild c({"bash", "-c", "echo oops >&2"});
  std::string line;
  ASSERT_TRUE(c.read_line(&line));
  EXPECT_EQ(line, "oops");
}

TEST(LineChild, AMissingProgramThrows) {
  EXPECT_THROW(LineChild({"/nonexistent/dlbench-no-such-program"}), std::runtime_error);
}
