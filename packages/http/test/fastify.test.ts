import { fastifyHarness } from "./support/apps/fastify-app.ts";
import { behaviourSuite } from "./support/behaviour.ts";

behaviourSuite(fastifyHarness);
