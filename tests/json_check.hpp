#pragma once
// A strict JSON reader, just enough to prove a trace file is valid JSON
// and to count its events by category: the tests must not trust the
// writer that they test.
#include <cctype>
#include <map>
#include <stdexcept>
#include <string>

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
  std::map<std::string, int> categories;  // "cat" values of objects, counted

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
  }
  void value(const std::string& key) {
    const char c = peek();
    if (c == '{') {
      ++i_;
      if (peek() == '}') { ++i_; return; }
      while (true) {
        const std::string k = string();
        expect(':');
        if (k == "cat" && peek() == '"') ++categories[string()];
        else value(k);
        if (peek() == ',') { ++i_; continue; }
        expect('}');
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
};

}  // namespace rt_test
