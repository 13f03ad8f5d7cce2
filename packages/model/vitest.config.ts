import { defineConfig } from "vitest/config";

// No database here: the model package does not use the shared global set-up.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 240_000,
  },
});
