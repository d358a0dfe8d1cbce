//===- GlooTransportTest.cpp - Gloo point-to-point, two ranks in-process --===//
//
// Two ranks of one job as two threads of this process, over loopback.
// Pending::test() on a receive must see the message once it has landed,
// without a wait(): the pipeline's readiness test (Varuna's run-time
// deviation) is built on it, and c10d's Gloo recv work says "completed" only
// after a wait.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Check.h"
#include "varuna/runtime/Transport.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

using namespace varuna::rt;
using Clock = std::chrono::steady_clock;

namespace {

/// A TCP port on 127.0.0.1 that was free a moment ago.
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

/// Both ranks connected (rank 0 serves the store, so they connect at once).
std::pair<std::unique_ptr<Transport>, std::unique_ptr<Transport>>
twoRanks(std::chrono::milliseconds timeout) {
  TransportOptions o;
  o.masterPort = freePort();
  o.worldSize = 2;
  o.timeout = timeout;
  TransportOptions o1 = o;
  o1.rank = 1;
  auto one = std::async(std::launch::async, [o1] { return connectGloo(o1); });
  std::unique_ptr<Transport> zero = connectGloo(o);
  return {std::move(zero), one.get()};
}

/// Polls `p.test()` for up to `limit`; whether it turned true.
bool becomesTrue(Pending &p, std::chrono::milliseconds limit) {
  auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (p.test())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return p.test();
}

} // namespace

TEST(GlooTransport, ReceiveTestSeesArrivalWithoutWait) {
  auto [r0, r1] = twoRanks(std::chrono::seconds(20));
  at::Tensor in = at::zeros({4});
  std::unique_ptr<Pending> recv = r0->recv(in, 1, 7);
  EXPECT_FALSE(recv->test()); // nothing sent yet
  std::unique_ptr<Pending> send = r1->send(at::arange(4, at::kFloat), 0, 7);
  EXPECT_TRUE(becomesTrue(*recv, std::chrono::seconds(10)));
  recv->wait();
  send->wait();
  EXPECT_TRUE(at::equal(in, at::arange(4, at::kFloat)));
  // A receive never tested is a plain wait.
  at::Tensor in2 = at::zeros({2});
  std::unique_ptr<Pending> recv2 = r1->recv(in2, 0, 8);
  r0->send(at::ones({2}), 1, 8)->wait();
  recv2->wait();
  EXPECT_TRUE(at::equal(in2, at::ones({2})));
}

// Tested, then nothing comes: wait() still gives up after the timeout,
// naming the receive; a tested receive dropped unwaited does not block.
TEST(GlooTransport, TestedReceiveStillTimesOut) {
  auto [r0, r1] = twoRanks(std::chrono::milliseconds(1500));
  at::Tensor in = at::zeros({4});
  std::unique_ptr<Pending> recv = r0->recv(in, 1, 3);
  EXPECT_FALSE(recv->test());
  auto start = Clock::now();
  try {
    recv->wait();
    ADD_FAILURE() << "a receive of a message never sent returned";
  } catch (const varuna::rt::Error &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("recv from rank 1"), std::string::npos) << m;
    EXPECT_NE(m.find("timeout 1.5 s"), std::string::npos) << m;
    // A link too slow for the timeout looks the same: the remedy is named.
    EXPECT_NE(m.find("(raise --timeout)"), std::string::npos) << m;
  }
  double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(waited, 1.4);
  EXPECT_LT(waited, 10);

  at::Tensor other = at::zeros({4});
  start = Clock::now();
  {
    std::unique_ptr<Pending> dropped = r0->recv(other, 1, 4);
    EXPECT_FALSE(dropped->test());
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
}
