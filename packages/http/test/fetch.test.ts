import { fetchHarness } from "./support/apps/fetch-app.ts";
import { behaviourSuite } from "./support/behaviour.ts";

behaviourSuite(fetchHarness);
