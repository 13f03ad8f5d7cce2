import { defineConfig } from "vitest/config";

/**
 * The vitest settings every package shares: workspace packages resolve to
 * their TypeScript sources (no build first), and one global set-up per
 * package migrates the template database its test files clone.
 */
export default defineConfig({
  resolve: { conditions: ["@idempo/source"] },
  ssr: { resolve: { conditions: ["@idempo/source"] } },
  test: {
    globalSetup: ["./test/global-setup.ts"],
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    // Generous on purpose: a test bounds its work, and a timeout only catches a hang.
    // A shared, loaded machine may take many times longer than an idle one.
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
});
