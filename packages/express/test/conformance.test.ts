import type { Receiver } from '@payhook/core';
import express5 from 'express';
import express4 from 'express4';
import {
  type AdapterHarness,
  describeAdapterConformance,
  runningApp,
} from '../../../test/conformance/adapter-conformance.js';
import { payhook } from '../src/index.js';

type ExpressFactory = typeof express5;

function harness(express: ExpressFactory): AdapterHarness {
  return {
    async start(receiver: Receiver, { bodyParser, host, parserLimitBytes, failBefore }) {
      const app = express();
      if (bodyParser) app.use(express.json({ limit: parserLimitBytes }));
      if (failBefore) app.use((_req, _res, next) => next(failBefore));
      app.use('/webhooks', payhook(receiver));
      app.get('/health', (_req, res) => {
        res.send('ok');
      });
      // The app's own error handler, for its other routes: payhook answers the webhook path's errors itself.
      app.use(
        (
          err: { status?: number; type?: string },
          _req: express5.Request,
          res: express5.Response,
          _next: express5.NextFunction,
        ) => {
          res.status(err.status ?? 500).json({ error: { code: err.type ?? 'internal' } });
        },
      );
      return runningApp(app.listen(0, host), host);
    },
  };
}

describeAdapterConformance('express 5', harness(express5));
describeAdapterConformance('express 4', harness(express4 as unknown as ExpressFactory));
