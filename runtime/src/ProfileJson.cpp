//===- ProfileJson.cpp - CNNRT_PROFILE_JSON: a step's time by location ----===//
#include "ProfileJson.h"

#include "cnnrt/Error.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace cnnrt {

namespace {

/// `s` as a JSON string literal (locations are ONNX node names: any bytes).
std::string quoted(const std::string &s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

} // namespace

std::string
locationProfileJson(const std::string &title,
                    const std::vector<ProfiledLaunch> &launches) {
  struct Sum {
    double ms = 0;
    int launches = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Sum> byLoc;
  double total = 0;
  for (const ProfiledLaunch &l : launches) {
    auto [it, inserted] = byLoc.try_emplace(l.loc);
    if (inserted)
      order.push_back(l.loc);
    it->second.ms += l.ms;
    it->second.launches += 1;
    total += l.ms;
  }
  std::string o = "{\"format\": \"cnnrt-profile\", \"version\": 1, \"title\": " +
                  quoted(title) + ", \"total_ms\": " + number(total) +
                  ", \"launches\": " + std::to_string(launches.size()) +
                  ",\n \"by_location\": {";
  for (size_t i = 0; i < order.size(); ++i) {
    const Sum &s = byLoc[order[i]];
    o += (i ? ",\n  " : "\n  ") + quoted(order[i]) + ": {\"ms\": " +
         number(s.ms) + ", \"launches\": " + std::to_string(s.launches) + "}";
  }
  return o + "}}\n";
}

void writeLocationProfile(const std::string &path, const std::string &title,
                          const std::vector<ProfiledLaunch> &launches) {
  std::string text = locationProfileJson(title, launches);
  std::FILE *f = std::fopen(path.c_str(), "w");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = errno;
  if (f && std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok)
    throw Error(ErrorKind::Config, "cnnrt: CNNRT_PROFILE_JSON: cannot write '" +
                                       path + "': " + std::strerror(err));
}

std::string profileJsonPathForProcess(const std::string &path,
                                      const char *worldSize, const char *rank) {
  if (path.empty() || !worldSize || std::atoi(worldSize) <= 1 || !rank ||
      !*rank)
    return path;
  return path + ".rank" + rank;
}

} // namespace cnnrt
