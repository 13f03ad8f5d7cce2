import { expressHarness } from "./support/apps/express-app.ts";
import { behaviourSuite } from "./support/behaviour.ts";

behaviourSuite(expressHarness);
