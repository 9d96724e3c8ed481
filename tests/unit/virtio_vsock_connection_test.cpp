// A vsock stream's flow control (virtio 1.2, 5.10.6.3) and state: the host never sends the
// guest more than its credit, a guest that overruns ours is caught, credit updates go out
// when they are due, and the control packets owed follow the stream's life.
#include <gtest/gtest.h>

#include <cstdint>

#include "vmm/devices/virtio/vsock/connection.h"

namespace dsec::virtio::vsock {
namespace {

constexpr uint64_t kGuestCid = 3;

VsockHeader guest_credit(uint32_t buf_alloc, uint32_t fwd_cnt) {
  return {.src_cid = kGuestCid,
          .dst_cid = kHostCid,
          .src_port = 52,
          .dst_port = 1 << 30,
          .len = 0,
          .type = kTypeStream,
          .op = kOpCreditUpdate,
          .flags = 0,
          .buf_alloc = buf_alloc,
          .fwd_cnt = fwd_cnt};
}

Connection established() {
  return Connection(kGuestCid, 1 << 30, 52, ConnectionState::kEstablished);
}

TEST(VsockConnection, TheHostSendsNoMoreThanTheGuestsCredit) {
  Connection c = established();
  EXPECT_EQ(c.peer_credit(), 0U);  // nothing known of the guest's buffer yet
  c.update_peer_credit(guest_credit(1000, 0));
  EXPECT_EQ(c.peer_credit(), 1000U);
  c.on_sent_to_guest(600);
  EXPECT_EQ(c.peer_credit(), 400U);
  c.on_sent_to_guest(400);
  EXPECT_EQ(c.peer_credit(), 0U);
  c.update_peer_credit(guest_credit(1000, 600));
  EXPECT_EQ(c.peer_credit(), 600U);
}

TEST(VsockConnection, CreditSurvivesCounterWrapAndNonsenseCountersGiveNone) {
  Connection c = established();
  c.on_sent_to_guest(0xfffffff0);
  c.update_peer_credit(guest_credit(0x100, 0xfffffff0));
  EXPECT_EQ(c.peer_credit(), 0x100U);
  c.on_sent_to_guest(0x20);  // rx_cnt wraps to 0x10
  EXPECT_EQ(c.rx_cnt(), 0x10U);
  EXPECT_EQ(c.peer_credit(), 0xe0U);
  // A fwd_cnt past what was sent, or a buffer that shrank below what is in flight.
  c.update_peer_credit(guest_credit(0x100, 0x11));
  EXPECT_EQ(c.peer_credit(), 0U);
  c.update_peer_credit(guest_credit(0x10, 0xfffffff0));
  EXPECT_EQ(c.peer_credit(), 0U);
}

TEST(VsockConnection, AGuestThatExceedsOurCreditIsCaught) {
  Connection c = established();
  EXPECT_TRUE(c.accept_guest_data(Connection::kBufAlloc - 1));
  EXPECT_TRUE(c.accept_guest_data(1));
  EXPECT_FALSE(c.accept_guest_data(1));
  EXPECT_EQ(c.tx_unforwarded(), Connection::kBufAlloc);
  c.on_forwarded_to_host(100);
  EXPECT_FALSE(c.accept_guest_data(101));
  EXPECT_TRUE(c.accept_guest_data(100));
}

TEST(VsockConnection, ACreditUpdateIsOwedOnceTheHostConsumedEnough) {
  Connection c = established();
  ASSERT_TRUE(c.accept_guest_data(Connection::kCreditUpdateThreshold));
  c.on_forwarded_to_host(Connection::kCreditUpdateThreshold - 1);
  EXPECT_FALSE(c.needs_credit_update());
  c.on_forwarded_to_host(1);
  EXPECT_TRUE(c.needs_credit_update());
  c.queue_control(kOpCreditUpdate);
  c.queue_control(kOpCreditUpdate);  // one pending is enough
  auto update = c.take_control();
  ASSERT_TRUE(update.has_value());
  EXPECT_EQ(update->op, kOpCreditUpdate);
  EXPECT_EQ(update->fwd_cnt, Connection::kCreditUpdateThreshold);
  EXPECT_EQ(update->buf_alloc, Connection::kBufAlloc);
  EXPECT_FALSE(c.has_control());
  EXPECT_FALSE(c.needs_credit_update());  // the guest now knows fwd_cnt
}

TEST(VsockConnection, HeadersGoFromTheHostToTheGuestsPort) {
  Connection c = established();
  const VsockHeader h = c.make_header(kOpRw, 10);
  EXPECT_EQ(h.src_cid, kHostCid);
  EXPECT_EQ(h.dst_cid, kGuestCid);
  EXPECT_EQ(h.src_port, 1U << 30);
  EXPECT_EQ(h.dst_port, 52U);
  EXPECT_EQ(h.len, 10U);
  EXPECT_EQ(h.type, kTypeStream);
  EXPECT_EQ(h.op, kOpRw);
}

TEST(VsockConnection, AHostInitiatedStreamCarriesDataOnlyAfterTheResponse) {
  Connection c(kGuestCid, 1 << 30, 52, ConnectionState::kLocalInit);
  c.update_peer_credit(guest_credit(4096, 0));
  EXPECT_FALSE(c.can_send_to_guest());
  EXPECT_FALSE(c.accept_guest_data(1));
  EXPECT_TRUE(c.on_response());
  EXPECT_EQ(c.state(), ConnectionState::kEstablished);
  EXPECT_TRUE(c.can_send_to_guest());
  EXPECT_TRUE(c.accept_guest_data(1));
  EXPECT_FALSE(c.on_response());  // a second RESPONSE is a protocol error
}

TEST(VsockConnection, GuestShutdownStopsEachDirection) {
  Connection c = established();
  c.update_peer_credit(guest_credit(4096, 0));
  EXPECT_EQ(c.on_peer_shutdown(kShutdownRcv), kShutdownRcv);
  EXPECT_FALSE(c.can_send_to_guest());
  EXPECT_TRUE(c.accept_guest_data(1));
  EXPECT_EQ(c.on_peer_shutdown(kShutdownSend | 0x100), kShutdownBoth);  // unknown bits ignored
  EXPECT_FALSE(c.accept_guest_data(1));
}

TEST(VsockConnection, ClosingOwesShutdownAndResetOwesOnlyRst) {
  Connection c = established();
  c.queue_control(kOpCreditUpdate);
  c.start_closing();
  EXPECT_EQ(c.state(), ConnectionState::kClosing);
  EXPECT_FALSE(c.can_send_to_guest());
  EXPECT_EQ(c.take_control()->op, kOpCreditUpdate);
  auto shutdown = c.take_control();
  ASSERT_TRUE(shutdown.has_value());
  EXPECT_EQ(shutdown->op, kOpShutdown);
  EXPECT_EQ(shutdown->flags, kShutdownBoth);
  c.queue_control(kOpCreditUpdate);
  c.reset();
  EXPECT_EQ(c.state(), ConnectionState::kClosed);
  EXPECT_EQ(c.take_control()->op, kOpRst);
  EXPECT_FALSE(c.has_control());
  c.reset();  // once closed, nothing more is owed
  EXPECT_FALSE(c.has_control());
}

TEST(VsockConnection, DescribeGivesBothDirectionsCountersAndWhatIsOwed) {
  Connection c = established();
  c.update_peer_credit(guest_credit(1000, 100));
  ASSERT_TRUE(c.accept_guest_data(700));
  c.on_forwarded_to_host(500);
  c.on_sent_to_guest(300);
  c.queue_control(kOpCreditUpdate);
  EXPECT_EQ(c.describe(),
            "host port 1073741824 <-> guest port 52, established: from the guest 700 bytes, 500 "
            "taken by the host (the guest last heard 0); to the guest 300 bytes, credit 800 of "
            "its 1000, 1 control packets owed");
  ASSERT_TRUE(c.take_control().has_value());
  c.on_peer_shutdown(kShutdownSend);
  EXPECT_EQ(c.describe(),
            "host port 1073741824 <-> guest port 52, established: from the guest 700 bytes, 500 "
            "taken by the host (the guest last heard 500); to the guest 300 bytes, credit 800 of "
            "its 1000, guest shut down 0x2");
}

}  // namespace
}  // namespace dsec::virtio::vsock
