import bodyParser from '@koa/bodyparser';
import type { Receiver } from '@payhook/core';
import Koa3 from 'koa';
import Koa2 from 'koa2';
import {
  type AdapterHarness,
  describeAdapterConformance,
  runningApp,
} from '../../../test/conformance/adapter-conformance.js';
import { payhook } from '../src/index.js';

function harness(Koa: typeof Koa3): AdapterHarness {
  return {
    // @koa/bodyparser keeps ctx.request.rawBody, so payhook still verifies the raw bytes after it.
    parserKeepsRawBody: true,
    async start(receiver: Receiver, { bodyParser: withParser, host, parserLimitBytes, failBefore }) {
      const app = new Koa();
      app.silent = true;
      const webhooks = payhook(receiver, { path: '/webhooks' });
      // Koa hands errors back up the chain: the boundary goes before whatever may fail.
      app.use(webhooks.errors);
      if (withParser) app.use(bodyParser({ jsonLimit: parserLimitBytes }));
      if (failBefore) {
        app.use(() => {
          throw failBefore;
        });
      }
      app.use(webhooks);
      app.use((ctx) => {
        ctx.body = 'other route';
      });
      return runningApp(app.listen(0, host), host);
    },
  };
}

describeAdapterConformance('koa 3', harness(Koa3));
describeAdapterConformance('koa 2', harness(Koa2 as unknown as typeof Koa3));
