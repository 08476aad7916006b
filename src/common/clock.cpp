#include "common/clock.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace cp {

Millis SystemClock::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const SystemClock& SystemClock::instance() {
  static const SystemClock clock;
  return clock;
}

Millis BootTimeClock::now_ms() const {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<Millis>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

const BootTimeClock& BootTimeClock::instance() {
  static const BootTimeClock clock;
  return clock;
}

std::string format_time(Millis t) {
  if (t == 0) return "";
  std::time_t secs = static_cast<std::time_t>(t / 1000);
  int ms = static_cast<int>(t % 1000);
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

bool parse_time(std::string_view s, Millis& out) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  std::string str(s);
  int consumed = 0;
  if (std::sscanf(str.c_str(), "%4d-%2d-%2d%n", &y, &mo, &d, &consumed) != 3 || consumed != 10) return false;
  if (mo < 1 || mo > 12 || d < 1 || d > 31) return false;
  std::size_t pos = 10;
  long frac_ms = 0;
  long offset_s = 0;
  if (pos < str.size()) {
    if (str[pos] != 'T' && str[pos] != 't' && str[pos] != ' ') return false;
    int n = 0;
    if (std::sscanf(str.c_str() + pos + 1, "%2d:%2d:%2d%n", &h, &mi, &sec, &n) != 3 || n != 8) return false;
    if (h > 23 || mi > 59 || sec > 60) return false;
    pos += 1 + 8;
    if (pos < str.size() && str[pos] == '.') {
      ++pos;
      int digits = 0;
      while (pos < str.size() && str[pos] >= '0' && str[pos] <= '9') {
        if (digits < 3) frac_ms = frac_ms * 10 + (str[pos] - '0');
        ++digits;
        ++pos;
      }
      if (digits == 0) return false;
      for (int i = digits; i < 3; ++i) frac_ms *= 10;
    }
    if (pos >= str.size()) return false;
    if (str[pos] == 'Z' || str[pos] == 'z') {
      ++pos;
    } else if (str[pos] == '+' || str[pos] == '-') {
      int oh = 0, om = 0, n2 = 0;
      if (std::sscanf(str.c_str() + pos + 1, "%2d:%2d%n", &oh, &om, &n2) != 2 || n2 != 5) return false;
      offset_s = (oh * 3600L + om * 60L) * (str[pos] == '+' ? 1 : -1);
      pos += 6;
    } else {
      return false;
    }
    if (pos != str.size()) return false;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  std::time_t secs = timegm(&tm);
  out = (static_cast<Millis>(secs) - offset_s) * 1000 + frac_ms;
  return true;
}

Millis month_start(Millis t) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(sys_time<milliseconds>(milliseconds(t)))};
  return duration_cast<milliseconds>(sys_days{ymd.year() / ymd.month() / 1}.time_since_epoch()).count();
}

Millis next_month_start(Millis t) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(sys_time<milliseconds>(milliseconds(t)))};
  const year_month next = year_month{ymd.year(), ymd.month()} + months(1);
  return duration_cast<milliseconds>(sys_days{next / 1}.time_since_epoch()).count();
}

std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace cp
