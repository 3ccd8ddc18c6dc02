#include "codegen/canonical_source.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace kiln {

namespace {

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// "t145" / "a3_0" / "v2_0_7" -> prefix, id digits, suffix ("", "_0", "_0_7"); false otherwise.
bool split_id_name(const std::string& tok, char* prefix, std::string* id, std::string* suffix) {
  if (tok.size() < 2 || (tok[0] != 't' && tok[0] != 'v' && tok[0] != 'o' && tok[0] != 'a'))
    return false;
  size_t i = 1;
  while (i < tok.size() && std::isdigit(static_cast<unsigned char>(tok[i]))) ++i;
  if (i == 1) return false;
  // The rest: (_digits)*
  for (size_t j = i; j < tok.size();) {
    if (tok[j] != '_' || j + 1 >= tok.size() ||
        !std::isdigit(static_cast<unsigned char>(tok[j + 1])))
      return false;
    ++j;
    while (j < tok.size() && std::isdigit(static_cast<unsigned char>(tok[j]))) ++j;
  }
  *prefix = tok[0];
  *id = tok.substr(1, i - 1);
  *suffix = tok.substr(i);
  return true;
}

}  // namespace

std::string canonical_source(const std::string& src) {
  size_t ext = src.find("extern \"C\"");
  if (ext == std::string::npos) return src;
  size_t hdr = src.rfind("\n// group ", ext);
  size_t start = hdr == std::string::npos ? ext : hdr + 1;
  // Only a header comment right before the declaration belongs to the kernel.
  if (hdr != std::string::npos && src.find("\n}", hdr) < ext) start = ext;

  std::string out = src.substr(0, start);
  out.reserve(src.size());
  std::map<std::string, int> ids;  // tensor id -> canonical index
  size_t i = start;
  if (src.compare(i, 9, "// group ") == 0) {  // "// group 12: ..." -> "// group: ..."
    size_t j = i + 9;
    while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
    if (j > i + 9 && j < src.size() && src[j] == ':') {
      size_t eol = src.find('\n', j);
      eol = eol == std::string::npos ? src.size() : eol;
      out += "// group";
      out.append(src, j, eol - j);  // the rest of the comment as is
      i = eol;
    }
  }
  while (i < src.size()) {
    char c = src[i];
    if (c == '/' && i + 1 < src.size() && (src[i + 1] == '/' || src[i + 1] == '*')) {
      // A comment: copied as is (an apostrophe in it is no literal).
      size_t j = src[i + 1] == '/' ? src.find('\n', i) : src.find("*/", i + 2);
      j = j == std::string::npos ? src.size() : j + (src[i + 1] == '/' ? 0 : 2);
      out.append(src, i, j - i);
      i = j;
    } else if (c == '"' || c == '\'') {  // a literal: copied as is
      size_t j = i + 1;
      while (j < src.size() && src[j] != c) j += src[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, src.size());
      out.append(src, i, j - i);
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {  // a number (1e-05f, 0x1f, 3LL)
      size_t j = i + 1;
      while (j < src.size() &&
             (ident_char(src[j]) || src[j] == '.' ||
              ((src[j] == '-' || src[j] == '+') && (src[j - 1] == 'e' || src[j - 1] == 'E'))))
        ++j;
      out.append(src, i, j - i);
      i = j;
    } else if (ident_start(c)) {
      size_t j = i + 1;
      while (j < src.size() && ident_char(src[j])) ++j;
      std::string tok = src.substr(i, j - i);
      char prefix = 0;
      std::string id, suffix;
      bool member =
          i > 0 && (src[i - 1] == '.' || (i > 1 && src[i - 1] == '>' && src[i - 2] == '-'));
      if (!member && split_id_name(tok, &prefix, &id, &suffix)) {
        auto it = ids.emplace(id, static_cast<int>(ids.size())).first;
        out += prefix;
        out += '_';
        out += std::to_string(it->second);
        out += suffix;
      } else {
        out += tok;
      }
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string code_without_comments(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size();) {
    char c = src[i];
    if (c == '/' && i + 1 < src.size() && (src[i + 1] == '/' || src[i + 1] == '*')) {
      size_t j = src[i + 1] == '/' ? src.find('\n', i) : src.find("*/", i + 2);
      i = j == std::string::npos ? src.size() : j + (src[i + 1] == '/' ? 0 : 2);
    } else if (c == '"' || c == '\'') {
      size_t j = i + 1;
      while (j < src.size() && src[j] != c) j += src[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, src.size());
      out.append(src, i, j - i);
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

}  // namespace kiln
