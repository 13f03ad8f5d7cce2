/**
 * Keeps ARCHITECTURE.md true. The import rules live in one place, the
 * tables of ARCHITECTURE.md between the `import-map` and `package-map`
 * markers; this test reads them and checks them against the import lines of
 * the code:
 *
 * - every file of packages/core/src belongs to a row of the map, and imports
 *   only what its row allows (a new folder needs a row before it can land);
 * - the map itself is layered (no two rows allow each other, directly or
 *   round a longer loop), and no file of packages/core/src is part of an
 *   import circle, type-only imports included;
 * - the shipped packages import idempo only through the entries their row
 *   names, and no relative import leaves the package.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const coreSrc = join(root, "packages", "core", "src");
const map = readFileSync(join(root, "ARCHITECTURE.md"), "utf8");

/** The rows of the Markdown table between `<!-- name:begin -->` and `<!-- name:end -->`: cells, trimmed. */
function tableRows(name: string): string[][] {
  const begin = map.indexOf(`<!-- ${name}:begin`);
  const end = map.indexOf(`<!-- ${name}:end -->`);
  if (begin < 0 || end < begin) throw new Error(`ARCHITECTURE.md has no ${name} table`);
  return map
    .slice(begin, end)
    .split("\n")
    .filter((line) => line.startsWith("|"))
    .slice(2) // the header and the |---| line
    .map((line) =>
      line
        .slice(1, -1)
        .split("|")
        .map((cell) => cell.trim()),
    );
}

/** The `quoted` names in a cell. */
const names = (cell: string | undefined): string[] => [...(cell ?? "").matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? "");

// `import ... from "x"`, `export ... from "x"`, `import "x"` at the start of a line (so not
// in a comment or a template string), and `import("x")` with a literal anywhere.
const STATIC =
  /^(?:import|export)(?:\s+type)?\s+(?:[\w$]+\s*,?\s*)?(?:\{[^}]*\}|\*(?:\s+as\s+[\w$]+)?)?\s*from\s+"([^"]+)"/gm;
const BARE = /^import\s+"([^"]+)"/gm;
const DYNAMIC = /\bimport\(\s*"([^"]+)"\s*\)/g;

/** Every module specifier a source file imports or re-exports. */
function importsOf(text: string): string[] {
  return [...text.matchAll(STATIC), ...text.matchAll(BARE), ...text.matchAll(DYNAMIC)].map((m) => m[1] ?? "");
}

function sourceFiles(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "node_modules" && entry.name !== "dist") found.push(...sourceFiles(path));
    } else if (/\.(ts|mts|js|mjs)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) found.push(path);
  }
  return found.sort();
}

/** `runtime/execution/run-step.ts` for a path under packages/core/src, with forward slashes. */
const coreName = (path: string) => relative(coreSrc, path).split(sep).join("/");

/** The relative imports of a file, resolved to paths (`.js` written for a `.ts` file). */
function relativeTargets(file: string): string[] {
  return importsOf(readFileSync(file, "utf8"))
    .filter((s) => s.startsWith("."))
    .map((s) => {
      const target = resolve(dirname(file), s);
      if (existsSync(target)) return target;
      const ts = target.replace(/\.js$/, ".ts");
      return existsSync(ts) ? ts : target;
    });
}

/**
 * The row a core file belongs to (a row's id is the first name in its first
 * column): the row naming the file itself (`errors.ts`), else the row naming
 * its folder (`runtime/execution/`: the files directly inside it, not those of
 * subfolders). A unit test `x.test.ts` belongs where `x.ts` does.
 * `undefined` when the map has no row for it.
 */
function unitOf(name: string, rowOf: Map<string, string>): string | undefined {
  const file = name.replace(/\.test\.ts$/, ".ts");
  const folder = file.includes("/") ? `${file.slice(0, file.lastIndexOf("/"))}/` : "";
  return rowOf.get(file) ?? rowOf.get(folder);
}

/** The first import circle found in `graph`, as the path round it, or `undefined`. */
function findCycle(graph: Map<string, Iterable<string>>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    if (state.get(node) === "done") return undefined;
    if (state.get(node) === "open") return [...path.slice(path.indexOf(node)), node];
    state.set(node, "open");
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(node, "done");
    return undefined;
  };
  for (const node of [...graph.keys()].sort()) {
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return undefined;
}

describe("the import map of packages/core/src (ARCHITECTURE.md)", () => {
  const rows = tableRows("import-map");
  const rowOf = new Map<string, string>(); // a name in the first column -> its row's id
  for (const [who] of rows) for (const name of names(who)) rowOf.set(name, names(who)[0] ?? "");
  const allowed = new Map<string, Set<string>>(); // row id -> the row ids it may import ("*": any)
  const unknown: string[] = [];
  for (const [who, , may] of rows) {
    const targets = may?.toLowerCase() === "everything" ? ["*"] : names(may);
    for (const t of targets) if (t !== "*" && !rowOf.has(t)) unknown.push(`${names(who)[0]} -> ${t}`);
    allowed.set(names(who)[0] ?? "", new Set(targets.map((t) => rowOf.get(t) ?? t)));
  }
  const files = sourceFiles(coreSrc);

  it("parses the map and the import lines (a map that reads as empty would pass anything)", () => {
    expect(allowed.size).toBeGreaterThan(10);
    expect(importsOf('import {\n  a,\n  type B,\n} from "./x.js";\nexport * from "y";\nimport "z";')).toEqual([
      "./x.js",
      "y",
      "z",
    ]);
    expect(importsOf(' * import { createEngine } from "@idempo/core";\nconst s = `import { a } from "b"`;')).toEqual(
      [],
    );
    expect(files.length).toBeGreaterThan(50);
  });

  it("names only rows that exist in its may-import column", () => {
    expect(unknown).toEqual([]);
  });

  it("has a row for every file", () => {
    expect(files.map(coreName).filter((name) => unitOf(name, rowOf) === undefined)).toEqual([]);
  });

  it("is layered: no loop of top folders that allow each other (inside runtime/ the services may use each other as listed)", () => {
    const top = (unit: string) => unit.split("/")[0] ?? unit;
    const graph = new Map<string, Set<string>>();
    for (const [unit, may] of allowed) {
      const next = graph.get(top(unit)) ?? new Set<string>();
      for (const t of may) if (t !== "*" && top(t) !== top(unit)) next.add(top(t));
      graph.set(top(unit), next);
    }
    expect(findCycle(graph)?.join(" -> ")).toBeUndefined();
  });

  it("is obeyed: each file imports only the rows its own row allows", () => {
    const forbidden: string[] = [];
    for (const file of files) {
      const from = unitOf(coreName(file), rowOf);
      const may = from === undefined ? undefined : allowed.get(from);
      if (from === undefined || may === undefined || may.has("*")) continue;
      for (const target of relativeTargets(file)) {
        const to = target.startsWith(coreSrc + sep) ? unitOf(coreName(target), rowOf) : undefined;
        if (to === undefined) forbidden.push(`${coreName(file)} imports ${relative(root, target)}, outside src/`);
        else if (to !== from && !may.has(to))
          forbidden.push(`${coreName(file)} (${from}) imports ${coreName(target)} (${to})`);
      }
      for (const spec of importsOf(readFileSync(file, "utf8"))) {
        if (spec.startsWith("@idempo/")) forbidden.push(`${coreName(file)} imports ${spec}`);
      }
    }
    expect(forbidden).toEqual([]);
  });

  it("has no import circle between files, type-only imports included", () => {
    const graph = new Map(files.map((file) => [coreName(file), relativeTargets(file).map(coreName)]));
    expect(findCycle(graph)?.join(" -> ")).toBeUndefined();
  });
});

describe("the package map (ARCHITECTURE.md)", () => {
  const rows = tableRows("package-map");

  it("lists the shipped packages", () => {
    expect(rows.length).toBeGreaterThanOrEqual(4);
  });

  it.each(rows.map(([pkg, , may]) => [names(pkg)[0] ?? "", names(may)] as const))(
    "%s imports idempo only through %j and stays inside its own folder",
    (pkg, entries) => {
      const dir = join(root, "packages", pkg);
      const shipped = ["src", "bin"].map((d) => join(dir, d)).filter(existsSync);
      expect(shipped.length).toBeGreaterThan(0);
      const wrong: string[] = [];
      for (const file of shipped.flatMap(sourceFiles)) {
        if (file.endsWith(".test.ts")) continue;
        const name = relative(root, file);
        for (const spec of importsOf(readFileSync(file, "utf8"))) {
          if (spec.startsWith("@idempo/") && !entries.includes(spec)) wrong.push(`${name} imports ${spec}`);
        }
        for (const target of relativeTargets(file)) {
          if (!target.startsWith(dir + sep)) wrong.push(`${name} imports ${relative(root, target)}`);
        }
      }
      expect(wrong).toEqual([]);
    },
  );
});
