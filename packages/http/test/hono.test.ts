import { honoHarness } from "./support/apps/hono-app.ts";
import { behaviourSuite } from "./support/behaviour.ts";

behaviourSuite(honoHarness);
