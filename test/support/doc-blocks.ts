import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** One TypeScript code block of a document: where it is, and its text. */
export interface DocBlock {
  /** The document, relative to the repository. */
  readonly file: string;
  /** The block's line in the document (its opening fence). */
  readonly line: number;
  readonly body: string;
  /** A file name for the block alone: the document's path and the line, flattened. */
  readonly name: string;
}

/** Every markdown file under `dir`, dependencies and build output left out. */
export function* markdownFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry === 'dist' || entry === '.git') continue;
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) yield* markdownFiles(full);
    else if (entry.endsWith('.md')) yield full;
  }
}

/**
 * Every code block marked `ts` (or `ts run`) in the repository's documents, the changesets left out
 * (they describe releases, not code to copy).
 */
export function typescriptBlocks(root: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  for (const full of markdownFiles(root)) {
    const file = relative(root, full);
    if (file.startsWith('.changeset/')) continue;
    const text = readFileSync(full, 'utf8');
    for (const m of text.matchAll(/^```(ts(?: run)?)\n([\s\S]*?)^```$/gm)) {
      const line = text.slice(0, m.index).split('\n').length;
      blocks.push({ file, line, body: m[2]!, name: `${file.replace(/\.md$/, '').replace(/[^\w]+/g, '_')}_${line}` });
    }
  }
  return blocks;
}
