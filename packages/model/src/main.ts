/**
 * `pnpm model`: check the model in every configuration (safety, then
 * liveness under weak fairness), then every broken variant and open
 * finding, and print a table with state counts and times. Exits 1 when the
 * model fails a check or a variant or finding passes one it must fail.
 */
import { CONFIGURATIONS, FINDINGS, VARIANTS, variantSpec } from "./checks.js";
import type { CheckReport } from "./spin.js";
import { check } from "./spin.js";

const rows: string[] = [];
let failed = false;
const line = (name: string, r: CheckReport, verdict: string) =>
  rows.push(
    `${verdict.padEnd(6)} ${name.padEnd(38)} ${String(r.statesStored).padStart(9)} states  depth ${String(r.depth).padStart(6)}  ${r.seconds}s${r.violation ? `  ${r.violation.kind} ${r.violation.property ?? ""}` : ""}`,
  );

for (const c of CONFIGURATIONS) {
  for (const mode of ["safety", "liveness"] as const) {
    const r = await check({ defines: c.defines, mode });
    const ok = r.complete && r.errors === 0;
    failed ||= !ok;
    line(`${c.name} ${mode}`, r, ok ? "ok" : "FAILED");
    if (!ok) console.log(r.output);
  }
}
for (const v of [...VARIANTS, ...FINDINGS]) {
  const r = await check(variantSpec(v));
  const found =
    r.violation?.kind === v.expect.kind &&
    (v.expect.kind !== "assertion" || r.violation.property === v.expect.property);
  failed ||= !found;
  line(`${v.define}`, r, found ? "found" : "MISSED");
}
console.log(rows.join("\n"));
process.exit(failed ? 1 : 0);
