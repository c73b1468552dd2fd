#pragma once
// A strict JSON reader, just enough to prove a trace file is valid JSON
// and to count its events by category: the tests must not trust the
// writer that they test.
#include <cctype>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace rt_test {

class json_reader {
 public:
  explicit json_reader(const std::string& s) : s_(s) {}
  // Parses the whole text; throws std::runtime_error at the first error.
  void parse() {
    value("");
    ws();
    if (i_ != s_.size()) fail("text after the value");
  }
  // "cat" values of objects, counted once per slice: objects whose "ph" is
  // "e" (the end of an async slice, whose "b" was counted) are not.
  std::map<std::string, int> categories;
  // Every object with "ph" and "ts", in file order: what a track shows.
  struct event {
    std::string cat, ph;
    long pid = -1, tid = -1;
    double ts = 0;
  };
  std::vector<event> events;

 private:
  [[noreturn]] void fail(const std::string& why) { throw std::runtime_error("invalid JSON at " + std::to_string(i_) + ": " + why); }
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  char peek() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c == '\\') {
        if (i_ >= s_.size()) fail("bad escape");
        const char e = s_[i_++];
        if (std::string("\"\\/bfnrt").find(e) != std::string::npos) out += e;
        else if (e == 'u') {
          for (int k = 0; k < 4; ++k)
            if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_++]))) fail("bad \\u escape");
        } else fail("bad escape");
      } else out += c;
    }
  }
  void number() {
    const std::size_t b = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      const std::size_t d = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (d == i_) fail("expected digits");
    };
    if (i_ < s_.size() && s_[i_] == '0') ++i_;
    else digits();
    if (i_ < s_.size() && s_[i_] == '.') ++i_, digits();
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    if (b == i_) fail("expected a number");
    last_number_ = std::stod(s_.substr(b, i_ - b));
  }
  void value(const std::string& key) {
    const char c = peek();
    if (c == '{') {
      ++i_;
      if (peek() == '}') { ++i_; return; }
      event e;
      bool has_ts = false;
      while (true) {
        const std::string k = string();
        expect(':');
        const char v = peek();
        if ((k == "cat" || k == "ph") && v == '"') (k == "cat" ? e.cat : e.ph) = string();
        else {
          value(k);
          if (k == "tid" && v != '"') e.tid = static_cast<long>(last_number_);
          if (k == "pid" && v != '"') e.pid = static_cast<long>(last_number_);
          if (k == "ts" && v != '"') e.ts = last_number_, has_ts = true;
        }
        if (peek() == ',') { ++i_; continue; }
        expect('}');
        if (!e.cat.empty() && e.ph != "e") ++categories[e.cat];
        if (!e.ph.empty() && has_ts) events.push_back(e);
        return;
      }
    }
    if (c == '[') {
      ++i_;
      if (peek() == ']') { ++i_; return; }
      while (true) {
        value(key);
        if (peek() == ',') { ++i_; continue; }
        expect(']');
        return;
      }
    }
    if (c == '"') { string(); return; }
    for (const char* lit : {"true", "false", "null"})
      if (s_.compare(i_, std::string(lit).size(), lit) == 0) { i_ += std::string(lit).size(); return; }
    number();
  }
  const std::string& s_;
  std::size_t i_ = 0;
  double last_number_ = 0;
};

}  // namespace rt_test
