#pragma once
// The rules reference, docs/rules.md, rendered from the rule schema and the
// engine's tables so the documentation cannot drift from what the parser
// accepts. tst_rules fails when the committed file differs from the rendering.

#include <string>

namespace qs {

// The rules reference as Markdown: the file format and matching, every field
// with its type, default and allowed values, every qtype and every calibration method.
std::string renderRulesReference();

} // namespace qs
