/**
 * Unified diffs of two lists of lines, as Python's `difflib.unified_diff`
 * writes them (pure; no DOM).
 *
 * A port of difflib's SequenceMatcher (no junk function, autojunk on), so the
 * renderer's "Diff to majority" shows the same hunks as the kernel's
 * `%%remote --diff` (monarch_jupyter/remote/view/diff.py); src/__tests__/diff.spec.ts
 * checks it against cases written by Python.
 */

/** A matching block: a[a..a+size] == b[b..b+size]. */
interface IMatch {
  a: number;
  b: number;
  size: number;
}

type Tag = 'equal' | 'replace' | 'delete' | 'insert';

/** An opcode: a[i1..i2] becomes b[j1..j2]. */
type Opcode = [Tag, number, number, number, number];

/** difflib's b2j with autojunk: where each line of b is, the popular ones (>1%) left out. */
function indexB(b: readonly string[]): Map<string, number[]> {
  const b2j = new Map<string, number[]>();
  b.forEach((line, j) => {
    const at = b2j.get(line);
    if (at) {
      at.push(j);
    } else {
      b2j.set(line, [j]);
    }
  });
  if (b.length >= 200) {
    const ntest = Math.floor(b.length / 100) + 1;
    for (const [line, at] of b2j) {
      if (at.length > ntest) {
        b2j.delete(line);
      }
    }
  }
  return b2j;
}

/** difflib's find_longest_match (no junk: only the "popular" lines are left out of b2j). */
function longestMatch(
  a: readonly string[],
  b: readonly string[],
  b2j: Map<string, number[]>,
  alo: number,
  ahi: number,
  blo: number,
  bhi: number
): IMatch {
  let besti = alo;
  let bestj = blo;
  let bestsize = 0;
  let j2len = new Map<number, number>();
  for (let i = alo; i < ahi; i++) {
    const next = new Map<number, number>();
    for (const j of b2j.get(a[i]) ?? []) {
      if (j < blo) {
        continue;
      }
      if (j >= bhi) {
        break;
      }
      const k = (j2len.get(j - 1) ?? 0) + 1;
      next.set(j, k);
      if (k > bestsize) {
        besti = i - k + 1;
        bestj = j - k + 1;
        bestsize = k;
      }
    }
    j2len = next;
  }
  while (besti > alo && bestj > blo && a[besti - 1] === b[bestj - 1]) {
    besti--;
    bestj--;
    bestsize++;
  }
  while (
    besti + bestsize < ahi &&
    bestj + bestsize < bhi &&
    a[besti + bestsize] === b[bestj + bestsize]
  ) {
    bestsize++;
  }
  return { a: besti, b: bestj, size: bestsize };
}

/** difflib's get_matching_blocks: adjacent blocks merged, ending with (la, lb, 0). */
function matchingBlocks(a: readonly string[], b: readonly string[]): IMatch[] {
  const b2j = indexB(b);
  const queue: [number, number, number, number][] = [
    [0, a.length, 0, b.length]
  ];
  const found: IMatch[] = [];
  while (queue.length) {
    const [alo, ahi, blo, bhi] = queue.pop()!;
    const m = longestMatch(a, b, b2j, alo, ahi, blo, bhi);
    if (m.size) {
      found.push(m);
      if (alo < m.a && blo < m.b) {
        queue.push([alo, m.a, blo, m.b]);
      }
      if (m.a + m.size < ahi && m.b + m.size < bhi) {
        queue.push([m.a + m.size, ahi, m.b + m.size, bhi]);
      }
    }
  }
  found.sort((x, y) => x.a - y.a || x.b - y.b || x.size - y.size);
  const merged: IMatch[] = [];
  let cur: IMatch = { a: 0, b: 0, size: 0 };
  for (const m of found) {
    if (cur.a + cur.size === m.a && cur.b + cur.size === m.b) {
      cur = { ...cur, size: cur.size + m.size };
    } else {
      if (cur.size) {
        merged.push(cur);
      }
      cur = m;
    }
  }
  if (cur.size) {
    merged.push(cur);
  }
  merged.push({ a: a.length, b: b.length, size: 0 });
  return merged;
}

/** difflib's get_opcodes. */
function opcodes(a: readonly string[], b: readonly string[]): Opcode[] {
  let i = 0;
  let j = 0;
  const answer: Opcode[] = [];
  for (const m of matchingBlocks(a, b)) {
    const tag: Tag | '' =
      i < m.a && j < m.b
        ? 'replace'
        : i < m.a
          ? 'delete'
          : j < m.b
            ? 'insert'
            : '';
    if (tag) {
      answer.push([tag, i, m.a, j, m.b]);
    }
    i = m.a + m.size;
    j = m.b + m.size;
    if (m.size) {
      answer.push(['equal', m.a, i, m.b, j]);
    }
  }
  return answer;
}

/** difflib's get_grouped_opcodes(n): hunks with `n` lines of context. */
function groupedOpcodes(
  a: readonly string[],
  b: readonly string[],
  n: number
): Opcode[][] {
  const codes = opcodes(a, b);
  if (!codes.length) {
    codes.push(['equal', 0, 1, 0, 1]);
  }
  const head = codes[0];
  if (head[0] === 'equal') {
    codes[0] = [
      'equal',
      Math.max(head[1], head[2] - n),
      head[2],
      Math.max(head[3], head[4] - n),
      head[4]
    ];
  }
  const tail = codes[codes.length - 1];
  if (tail[0] === 'equal') {
    codes[codes.length - 1] = [
      'equal',
      tail[1],
      Math.min(tail[2], tail[1] + n),
      tail[3],
      Math.min(tail[4], tail[3] + n)
    ];
  }
  const groups: Opcode[][] = [];
  let group: Opcode[] = [];
  for (const code of codes) {
    const [tag, , i2, , j2] = code;
    let [, i1, , j1] = code;
    if (tag === 'equal' && i2 - i1 > 2 * n) {
      group.push([tag, i1, Math.min(i2, i1 + n), j1, Math.min(j2, j1 + n)]);
      groups.push(group);
      group = [];
      i1 = Math.max(i1, i2 - n);
      j1 = Math.max(j1, j2 - n);
    }
    group.push([tag, i1, i2, j1, j2]);
  }
  if (group.length && !(group.length === 1 && group[0][0] === 'equal')) {
    groups.push(group);
  }
  return groups;
}

/** difflib's _format_range_unified: "3", "3,2", "2,0". */
function range(start: number, stop: number): string {
  const length = stop - start;
  if (length === 1) {
    return `${start + 1}`;
  }
  return `${length ? start + 1 : start},${length}`;
}

/**
 * `difflib.unified_diff(a, b, fromfile, tofile, lineterm='', n=context)`:
 * `---`/`+++` headers, `@@` hunk lines, then ` `/`-`/`+` lines; [] when equal.
 */
export function unifiedDiff(
  a: readonly string[],
  b: readonly string[],
  fromfile: string,
  tofile: string,
  context: number
): string[] {
  const out: string[] = [];
  for (const group of groupedOpcodes(a, b, context)) {
    if (!out.length) {
      out.push(`--- ${fromfile}`, `+++ ${tofile}`);
    }
    const first = group[0];
    const last = group[group.length - 1];
    out.push(`@@ -${range(first[1], last[2])} +${range(first[3], last[4])} @@`);
    for (const [tag, i1, i2, j1, j2] of group) {
      if (tag === 'equal') {
        a.slice(i1, i2).forEach(line => out.push(` ${line}`));
        continue;
      }
      if (tag === 'replace' || tag === 'delete') {
        a.slice(i1, i2).forEach(line => out.push(`-${line}`));
      }
      if (tag === 'replace' || tag === 'insert') {
        b.slice(j1, j2).forEach(line => out.push(`+${line}`));
      }
    }
  }
  return out;
}
