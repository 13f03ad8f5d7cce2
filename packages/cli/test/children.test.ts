/**
 * A parent with a `.map` item and its child runs through the real `idempo`
 * binary: `keys show` names the parent's children with their state, and a
 * child's parent; `--json` carries both. The console's run page links each
 * to the other.
 */
import { createEngine, deriveChildKey, workflow } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { runPath } from "../src/console/paths.ts";
import { runPage } from "../src/console/run-page.ts";
import { idempo } from "./support/cli.ts";

const child = workflow("cli_transfer")
  .step("pay", () => ({ id: "tr" }))
  .respond(() => ({ status: 201, body: null }));
const parent = workflow("cli_payout")
  .map("transfers", child, () => [{}, {}, {}], { concurrency: 2 })
  .respond(() => ({ status: 200, body: null }));

const seeded = useClonedDatabase("idempo_cli_children", {
  pool: 2,
  prepare: async (db) => {
    await createEngine({ db }).runOnce(parent, { tenantId: "acme", key: "payout-1", input: {} });
  },
});

const run = (args: string[]) => idempo(args, { DATABASE_URL: seeded.url });

describe("keys show: parent and children", () => {
  it("shows a parent's children and what it waits for, and a child's parent", async () => {
    const shown = await run(["keys", "show", "acme", "payout-1"]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/waits for\s+the children of transfers/);
    expect(shown.stdout).toContain("Children");
    const keys = [0, 1, 2].map((i) => deriveChildKey("acme", "payout-1", "cli_payout", "transfers", i));
    for (const [i, key] of keys.entries()) expect(shown.stdout).toMatch(new RegExp(`transfers\\[${i}\\]\\s+${key}`));
    const json = JSON.parse((await run(["keys", "show", "acme", "payout-1", "--json"])).stdout);
    expect(json.children.map((c: { key: string; status: string }) => [c.key, c.status])).toEqual(
      keys.map((k) => [k, "suspended"]),
    );
    const queued = await run(["keys", "show", "acme", keys[2] ?? "", "--json"]);
    expect(JSON.parse(queued.stdout)).toMatchObject({
      parent: { key: "payout-1", item: "transfers", index: 2 },
      waitingFor: { kind: "queued" },
    });
    const human = await run(["keys", "show", "acme", keys[0] ?? ""]);
    expect(human.stdout).toMatch(/parent\s+payout-1 \(item transfers, child 0\)/);
  });

  it("the console's run page lists a parent's children, each linked, and links a child to its parent", async () => {
    const engine = createEngine({ db: seeded.db });
    const keys = [0, 1, 2].map((i) => deriveChildKey("acme", "payout-1", "cli_payout", "transfers", i));
    const record = await engine.inspect("acme", "payout-1");
    if (!record || record.status === "expired") throw new Error("the parent has no record");
    const page = String(await runPage(record, new Date(), false));
    expect(page).toContain('data-testid="children"');
    // One row per child, in order, each with its own link.
    const rows = page
      .split("<tr data-child=")
      .slice(1)
      .map((r) => r.slice(0, r.indexOf("</tr>")));
    expect(rows).toHaveLength(3);
    for (const [i, key] of keys.entries()) {
      expect(rows[i]).toContain(`"transfers[${i}]"`);
      expect(rows[i]).toContain(`href="${runPath("acme", key)}"`);
    }
    const child = await engine.inspect("acme", keys[1] ?? "");
    if (!child || child.status === "expired") throw new Error("the child has no record");
    const childPage = String(await runPage(child, new Date(), false));
    expect(childPage).toContain(`href="${runPath("acme", "payout-1")}"`);
    expect(childPage).toMatch(/data-testid="parent"[\s\S]*?\(item transfers, child 1\)/);
    expect(childPage).not.toContain('data-testid="children"');
  });
});
