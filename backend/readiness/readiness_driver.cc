#include "backend/readiness/readiness_driver.h"

#include <algorithm>

namespace ptybox::backend {

ReadinessDriver::ReadinessDriver(ReadinessHost& host, ReadinessEngine engine,
                                 SettleCallback on_settle)
    : host_(host), engine_(std::move(engine)), on_settle_(std::move(on_settle)) {}

ReadinessDriver::~ReadinessDriver() { *alive_ = false; }

void ReadinessDriver::Stop() {
  stopped_ = true;
  host_.CancelTimer();
}

void ReadinessDriver::Resume() {
  stopped_ = false;
  Pump();
}

bool ReadinessDriver::NeedsLastLook(TimePoint now) const {
  if (!engine_.has_candidate() || engine_.settled()) return false;
  std::optional<TimePoint> fallback = engine_.FallbackAt();
  if (!fallback || now < *fallback) return false;
  return !last_probe_ || *last_probe_ < *fallback - engine_.handoff_grace();
}

void ReadinessDriver::StartInspection() {
  probe_in_flight_ = true;
  std::weak_ptr<bool> alive = alive_;
  host_.terminal().Inspect([this, alive](ForegroundFacts facts) {
    if (alive.expired()) return;
    probe_in_flight_ = false;
    if (settle_reported_ || stopped_) return;
    last_probe_ = host_.Now();
    if (!facts.alternate_screen) facts.alternate_screen = host_.ShowsAlternateScreen();
    engine_.OnProbe(*last_probe_, facts);
    Pump();
  });
}

void ReadinessDriver::Pump() {
  if (in_pump_) {
    repump_ = true;
    return;
  }
  in_pump_ = true;
  do {
    repump_ = false;
    if (settle_reported_ || stopped_) break;
    const TimePoint now = host_.Now();
    if (NeedsLastLook(now)) {
      if (!probe_in_flight_) StartInspection();
      break;  // its facts pump again
    }
    ReadinessEngine::Decision decision = engine_.Evaluate(now);
    if (decision.settle) {
      settle_reported_ = true;
      host_.CancelTimer();
      on_settle_(*decision.settle);  // may destroy nothing: the owner outlives this call
      break;
    }
    if (decision.probe_now && !probe_in_flight_) StartInspection();
    std::optional<TimePoint> wake = decision.wake_at;
    if (decision.probe_at && !probe_in_flight_) {
      wake = wake ? std::min(*wake, *decision.probe_at) : *decision.probe_at;
    }
    if (wake) host_.ArmTimer(*wake);
  } while (repump_);
  in_pump_ = false;
}

}  // namespace ptybox::backend
