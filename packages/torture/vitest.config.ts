import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { conditions: ["@idempo/source"] },
  ssr: { resolve: { conditions: ["@idempo/source"] } },
  test: {
    globalSetup: ["./test/global-setup.ts"],
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
