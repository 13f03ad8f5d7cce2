/**
 * V8 profiles (a CPU profile's samples, a sampling heap profile's tree)
 * turned into costs per operation: the self time or the allocated bytes of
 * each function, and the same summed per package (idempo's files one by
 * one, each dependency as a whole, Node's internals, the garbage collector).
 */

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

/** A node of either profile: the CPU profile's list (children by id) or the heap profile's tree. */
export interface ProfileNode {
  readonly id?: number;
  readonly callFrame: CallFrame;
  readonly selfSize?: number;
  readonly children?: readonly (number | ProfileNode)[];
}

/** One function's cost per operation (µs of self time, or bytes). */
export interface Entry {
  readonly frame: CallFrame;
  readonly perOp: number;
}

export interface Cost {
  readonly name: string;
  readonly perOp: number;
}

/**
 * Self time per operation of every node of a CPU profile, µs: each node's
 * share of the busy samples (idle ones left out) times `cpuUsPerOp`, the
 * client CPU measured over the profiled operations. Sample counts, not the
 * profile's time deltas: on a loaded machine a delta also holds the time
 * the process waited for a core.
 */
export function cpuCosts(nodes: readonly ProfileNode[], samples: readonly number[], cpuUsPerOp: number): Entry[] {
  const idle = new Set(nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id));
  const hits = new Map<number, number>();
  let busy = 0;
  for (const id of samples) {
    if (idle.has(id)) continue;
    hits.set(id, (hits.get(id) ?? 0) + 1);
    busy++;
  }
  return nodes.map((n) => ({ frame: n.callFrame, perOp: ((hits.get(n.id ?? -1) ?? 0) / busy) * cpuUsPerOp }));
}

/** Bytes allocated per operation by every node of a sampling heap profile. */
export function heapCosts(head: ProfileNode, ops: number): Entry[] {
  const out: Entry[] = [];
  const walk = (node: ProfileNode) => {
    out.push({ frame: node.callFrame, perOp: (node.selfSize ?? 0) / ops });
    for (const child of node.children ?? []) if (typeof child !== "number") walk(child);
  };
  walk(head);
  return out;
}

const CORE_DIST = /\/packages\/core\/dist\/(.+)$/;
const DEPENDENCY = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//;

/** Where a frame's code lives: an idempo file, a dependency, Node, or V8's own pseudo-frames. */
function packageOf(frame: CallFrame): string {
  if (frame.url === "") return frame.functionName.startsWith("(") ? frame.functionName : "(native)";
  if (frame.url.startsWith("node:")) return "node internals";
  const core = CORE_DIST.exec(frame.url);
  if (core) return `idempo ${core[1]}`;
  const dependency = DEPENDENCY.exec(frame.url);
  if (dependency) return dependency[1] as string;
  if (frame.url.includes("/packages/bench/")) return "bench harness";
  return frame.url;
}

function shortUrl(url: string): string {
  const core = CORE_DIST.exec(url);
  if (core) return core[1] as string;
  return url.slice(url.lastIndexOf("/", url.lastIndexOf("/") - 1) + 1);
}

function summed(entries: readonly Entry[], key: (frame: CallFrame) => string): Cost[] {
  const sums = new Map<string, number>();
  for (const e of entries) if (e.perOp > 0) sums.set(key(e.frame), (sums.get(key(e.frame)) ?? 0) + e.perOp);
  return [...sums].map(([name, perOp]) => ({ name, perOp })).sort((a, b) => b.perOp - a.perOp);
}

/** Costs summed per package, largest first. */
export const byPackage = (entries: readonly Entry[]): Cost[] => summed(entries, packageOf);

/** Costs summed per function (name, file and line), largest first. */
export const byFunction = (entries: readonly Entry[]): Cost[] =>
  summed(entries, (f) =>
    f.url === "" ? f.functionName : `${f.functionName || "(anonymous)"} ${shortUrl(f.url)}:${f.lineNumber + 1}`,
  );
