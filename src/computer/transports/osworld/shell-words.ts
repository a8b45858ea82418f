/** Command lines as Python's `shlex` reads and writes them (POSIX rules). */
import { homedir } from "node:os";

/** `shlex.quote`: one word the shell reads back unchanged. */
export function quoteWord(word: string): string {
  if (word !== "" && /^[\w@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'"'"'`)}'`;
}

export function joinWords(words: readonly string[]): string {
  return words.map(quoteWord).join(" ");
}

/** `shlex.split` (POSIX mode, no comments); throws on an unclosed quote or a final backslash. */
export function splitWords(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote === "'") {
      if (ch === "'") quote = null;
      else word += ch;
    } else if (quote === '"') {
      if (ch === '"') quote = null;
      else if (ch === "\\" && i + 1 < line.length && '\\"$`\n'.includes(line[i + 1])) word += line[++i];
      else word += ch;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      inWord = true;
      if (ch === "'" || ch === '"') quote = ch;
      else if (ch === "\\") {
        if (i + 1 >= line.length) throw new Error("No escaped character");
        word += line[++i];
      } else word += ch;
    }
  }
  if (quote) throw new Error("No closing quotation");
  if (inWord) words.push(word);
  return words;
}

/** Every word that starts with `~/` has the home directory put in its place (as upstream does). */
export function expandHomeWords(words: readonly string[]): string[] {
  return words.map((w) => (w.startsWith("~/") ? `${homedir()}${w.slice(1)}` : w));
}
