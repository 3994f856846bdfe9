import { createWebHandler } from '@payhook/web';
import { after } from 'next/server';
import { getReceiver } from './receiver.js';

// Route handlers see no socket: the client address is the one the proxy in front of the app
// writes (Vercel and most load balancers set x-real-ip; set trustedProxies instead for a proxy
// that appends X-Forwarded-For). `after` runs the event's handlers once the 200 is sent.
let handler;

export function POST(request) {
  handler ??= createWebHandler(getReceiver(), {
    waitUntil: after,
    getClientAddress: (req) => req.headers.get('x-real-ip') ?? undefined,
  });
  return handler(request);
}

export const dynamic = 'force-dynamic';
